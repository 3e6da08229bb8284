package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"github.com/ax-sched/ax/cmd/ax/internal/schedcli"
	"github.com/spf13/cobra"
)

func newScheduleCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "schedule",
		Short: "Cron schedules (seconds and time zones; misfire and overlap policies)",
		Long: `Cron schedules (seconds and time zones; misfire and overlap policies).

Each tenant names its schedules in a namespace of its own: a schedule is
its task's tenant's. A token of one tenant lists and addresses its own
schedules (--tenant naming another is refused, 403); a token of every
tenant lists every tenant's and names the tenant with --tenant when two
tenants use a name. --tenant is taken from the command line only.`,
	}
	var file, tenant string
	// --tenant from the command line only: an AX_TENANT exported for
	// submits must not address another namespace.
	var listExplicit, getExplicit func(string) bool
	tenantFor := func(explicit func(string) bool) string {
		if explicit != nil && explicit("tenant") {
			return tenant
		}
		return ""
	}
	create := &cobra.Command{
		Use:   "create -f schedule.json",
		Short: "Create a schedule",
		Args:  cobra.NoArgs,
		RunE: cliRun(func(ctx context.Context, env *cliEnv, _ []string) error {
			body, err := env.readJSONFile(file)
			if err != nil {
				return err
			}
			res, err := env.api.CreateSchedule(ctx, body)
			if err != nil {
				return err
			}
			if env.json {
				return env.printJSON(res)
			}
			name := render.RawField(res, "name")
			if name == "" {
				name = render.RawField(body, "name")
			}
			fmt.Fprintf(env.stdout, "schedule %s created\n", render.Or(name))
			return nil
		}),
	}
	create.Flags().StringVarP(&file, "file", "f", "", "schedule definition, JSON (- for stdin)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List schedules",
		Args:  cobra.NoArgs,
		RunE: cliRun(func(ctx context.Context, env *cliEnv, _ []string) error {
			res, err := env.api.ListSchedulesOf(ctx, tenantFor(listExplicit))
			if err != nil {
				return err
			}
			if env.json || !render.Schedules(env.stdout, res, env.loc) {
				return env.printJSON(res)
			}
			return nil
		}),
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a schedule",
		Args:  cobra.ExactArgs(1),
		RunE: cliRun(func(ctx context.Context, env *cliEnv, args []string) error {
			res, err := env.api.GetScheduleOf(ctx, tenantFor(getExplicit), args[0])
			if err != nil {
				return err
			}
			var st apiv1.ScheduleStatus
			if env.json || json.Unmarshal(res, &st) != nil || st.Name == "" {
				return env.printJSON(res)
			}
			w := render.Table(env.stdout)
			render.Schedule(w, &st, env.loc)
			return w.Flush()
		}),
	}
	listExplicit, getExplicit = cliTrackExplicit(list), cliTrackExplicit(get)
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's schedules (a token of one tenant: its own)")
	get.Flags().StringVar(&tenant, "tenant", "", "the schedule's tenant (default: the token's; needed by a token of every tenant when two tenants use the name)")
	run := func(body func(context.Context, schedcli.Env, []string) error) func(*cobra.Command, []string) error {
		return cliRun(func(ctx context.Context, env *cliEnv, args []string) error {
			return body(ctx, schedcli.Env{API: env.api, JSON: env.json, Stdout: env.stdout, Loc: env.loc, PrintJSON: env.printJSON}, args)
		})
	}
	c.AddCommand(cliCommand(create), cliCommand(list), cliCommand(get))
	c.AddCommand(append(schedcli.Actions(run), schedcli.Commands(run)...)...)
	return c
}

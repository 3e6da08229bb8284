package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
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
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			body, err := env.ReadJSONFile(file)
			if err != nil {
				return err
			}
			res, err := env.API.CreateSchedule(ctx, body)
			if err != nil {
				return err
			}
			if env.JSON {
				return env.PrintJSON(res)
			}
			name := render.RawField(res, "name")
			if name == "" {
				name = render.RawField(body, "name")
			}
			fmt.Fprintf(env.Stdout, "schedule %s created\n", render.Or(name))
			return nil
		}),
	}
	create.Flags().StringVarP(&file, "file", "f", "", "schedule definition, JSON (- for stdin)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List schedules",
		Args:  cobra.NoArgs,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			res, err := env.API.ListSchedulesOf(ctx, tenantFor(listExplicit))
			if err != nil {
				return err
			}
			if env.JSON || !render.Schedules(env.Stdout, res, env.Loc) {
				return env.PrintJSON(res)
			}
			return nil
		}),
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a schedule",
		Args:  cobra.ExactArgs(1),
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			res, err := env.API.GetScheduleOf(ctx, tenantFor(getExplicit), args[0])
			if err != nil {
				return err
			}
			var st apiv1.ScheduleStatus
			if env.JSON || json.Unmarshal(res, &st) != nil || st.Name == "" {
				return env.PrintJSON(res)
			}
			w := render.Table(env.Stdout)
			render.Schedule(w, &st, env.Loc)
			return w.Flush()
		}),
	}
	listExplicit, getExplicit = cli.TrackExplicit(list), cli.TrackExplicit(get)
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's schedules (a token of one tenant: its own)")
	get.Flags().StringVar(&tenant, "tenant", "", "the schedule's tenant (default: the token's; needed by a token of every tenant when two tenants use the name)")
	c.AddCommand(cliCommand(create), cliCommand(list), cliCommand(get))
	c.AddCommand(append(schedcli.Actions(), schedcli.Commands()...)...)
	return c
}

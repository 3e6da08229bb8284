package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ax-sched/ax/apiv1"
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
			name := rawField(res, "name")
			if name == "" {
				name = rawField(body, "name")
			}
			fmt.Fprintf(env.stdout, "schedule %s created\n", cliOr(name))
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
			if env.json || !writeSchedules(env.stdout, res, env.loc) {
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
			w := cliTable(env.stdout)
			writeSchedule(w, &st, env.loc)
			return w.Flush()
		}),
	}
	var pauseExplicit, resumeExplicit, delExplicit func(string) bool
	pause := scheduleAction("pause", "Stop a schedule from firing", "paused", func(ctx context.Context, env *cliEnv, name string) (json.RawMessage, error) {
		return env.api.PauseScheduleOf(ctx, tenantFor(pauseExplicit), name)
	})
	resume := scheduleAction("resume", "Let a paused schedule fire again", "resumed", func(ctx context.Context, env *cliEnv, name string) (json.RawMessage, error) {
		return env.api.ResumeScheduleOf(ctx, tenantFor(resumeExplicit), name)
	})
	del := scheduleAction("delete", "Delete a schedule", "deleted", func(ctx context.Context, env *cliEnv, name string) (json.RawMessage, error) {
		return nil, env.api.DeleteScheduleOf(ctx, tenantFor(delExplicit), name)
	})
	listExplicit, getExplicit = cliTrackExplicit(list), cliTrackExplicit(get)
	pauseExplicit, resumeExplicit, delExplicit = cliTrackExplicit(pause), cliTrackExplicit(resume), cliTrackExplicit(del)
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's schedules (a token of one tenant: its own)")
	for _, sub := range []*cobra.Command{get, pause, resume, del} {
		sub.Flags().StringVar(&tenant, "tenant", "", "the schedule's tenant (default: the token's; needed by a token of every tenant when two tenants use the name)")
	}
	c.AddCommand(cliCommand(create), cliCommand(list), cliCommand(get), pause, resume, del)
	return c
}

// scheduleAction is pause, resume or delete NAME. With -o json it prints
// the server's answer, or {"name":..., "<done>":true} when the answer is
// empty, so scripts always get JSON.
func scheduleAction(use, short, done string, call func(context.Context, *cliEnv, string) (json.RawMessage, error)) *cobra.Command {
	return cliCommand(&cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: cliRun(func(ctx context.Context, env *cliEnv, args []string) error {
			res, err := call(ctx, env, args[0])
			if err != nil {
				return err
			}
			if env.json {
				if len(res) == 0 {
					return env.printJSON(map[string]any{"name": args[0], done: true})
				}
				return env.printJSON(res)
			}
			fmt.Fprintf(env.stdout, "schedule %s %s\n", args[0], done)
			return nil
		}),
	})
}

// writeSchedules prints a schedule list as a table when it has the expected
// shape ({"schedules":[...]}, or a bare array, of schedules with names),
// times as every other table prints them; false otherwise.
func writeSchedules(out io.Writer, raw json.RawMessage, loc *time.Location) bool {
	var list []apiv1.ScheduleStatus
	var wrapped apiv1.ScheduleList
	switch {
	case json.Unmarshal(raw, &wrapped) == nil && wrapped.Schedules != nil:
		list = wrapped.Schedules
	case json.Unmarshal(raw, &list) == nil:
	default:
		return false
	}
	for _, s := range list {
		if s.Name == "" {
			return false
		}
	}
	w := cliTable(out)
	fmt.Fprintln(w, "NAME\tTENANT\tCRON\tTIME ZONE\tHOME\tPAUSED\tLAST FIRED\tNEXT SLOT")
	for _, s := range list {
		tenant := ""
		if s.Task != nil {
			tenant = s.Task.Tenant
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", s.Name, cliOr(tenant), cliOr(s.Cron), cliOr(s.Timezone), cliOr(s.HomeRegion),
			s.Paused, cliTime(s.LastFiredSlot, loc), cliTime(s.NextSlot, loc))
	}
	return w.Flush() == nil
}

// writeSchedule prints one schedule as "Field:  value" lines (as ax get
// prints a task), the empty ones left out.
func writeSchedule(w *tabwriter.Writer, s *apiv1.ScheduleStatus, loc *time.Location) {
	row := func(k, v string) {
		if v != "" && v != "-" {
			fmt.Fprintf(w, "%s:\t%s\n", k, v)
		}
	}
	row("Name", s.Name)
	row("Cron", s.Cron)
	row("Time zone", s.Timezone)
	row("Home region", s.HomeRegion)
	row("Paused", strconv.FormatBool(s.Paused))
	misfire := s.Misfire
	if s.CatchUpLimit > 0 {
		misfire += fmt.Sprintf(" (at most %d)", s.CatchUpLimit)
	}
	row("Misfire", misfire)
	row("Overlap", s.Overlap)
	if s.Jitter > 0 {
		row("Jitter", time.Duration(s.Jitter).String())
	}
	row("Created", cliTime(&s.CreatedAt, loc))
	row("Created by", s.CreatedBy)
	last := cliTime(s.LastSlot, loc)
	if last != "-" && s.LastOutcome != "" {
		last += " (" + s.LastOutcome + ")"
	}
	row("Last slot", last)
	row("Last fired", cliTime(s.LastFiredSlot, loc))
	row("Last task", s.LastTaskID)
	row("Next slot", cliTime(s.NextSlot, loc))
	if t := s.Task; t != nil {
		row("Task type", t.Type)
		if t.Priority != nil {
			row("Task priority", strconv.Itoa(*t.Priority))
		}
		row("Task tenant", t.Tenant)
		row("Task tags", formatTags(t.Tags))
		row("Task regions", strings.Join(t.Regions, ","))
		row("Task payload", cliCut(string(t.Payload), 200))
	}
}

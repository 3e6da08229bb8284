package main

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/task"
)

func newGetCmd() *cobra.Command {
	var wait time.Duration
	c := cliCommand(&cobra.Command{
		Use:   "get ID",
		Short: "Show a task: spec, state, progress, attempts, where it runs, times, last error, result",
		Args:  cobra.ExactArgs(1),
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			var waitErr error // how the wait ended: nil once it succeeded
			if wait > 0 {
				_, waitErr = client.Wait(ctx, env.API, args[0], wait)
			}
			t, err := env.API.Get(ctx, args[0])
			if err != nil {
				return err
			}
			if err := env.Show(t, func(w *tabwriter.Writer) { render.Task(w, t, env.Loc) }); err != nil {
				return err
			}
			render.TaskHint(env.Stderr, t)
			return waitErr
		}),
	})
	c.Flags().DurationVar(&wait, "wait", 0, "first wait up to this long for the task to end (GET /v1/tasks/{id}/result?wait=); exit 1 unless it succeeded")
	return c
}

func newTasksCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "tasks",
		Short: "Tasks of every region: list and search",
	}
	c.AddCommand(newTasksListCmd())
	return c
}

func newTasksListCmd() *cobra.Command {
	var (
		f             client.TaskFilter
		state         string
		after, before string
		explicit      func(string) bool
	)
	c := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List tasks of every region, newest first, by state, type, tenant, pool, creation time or payload",
		Long: `List tasks, newest first, gathered from every region of the federation by
the server you ask (or from --region only). The REGION column is the region
that holds each task: a task handed off is listed once, where it went. A
tenant's token lists only its tenant's tasks; --payload (a substring of the
payload's JSON) needs an operator token. A region that did not answer is
named on stderr and the command exits 1 after printing what the others gave.
--region and --tenant are taken from the command line only, never from AX_*
env or the settings file.`,
		Example: `  ax tasks ls --state RUNNING --pool cpu
  ax tasks ls --type report.generate --created-after 2026-12-01T00:00:00Z
  ax tasks ls --limit 20 --cursor <next cursor printed by the previous page>`,
		Args: cobra.NoArgs,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			if f.Limit < 1 {
				return cli.Usage("--limit must be at least 1")
			}
			f.State = task.State(strings.ToUpper(state))
			for _, t := range []struct {
				flag, v string
				to      *time.Time
			}{{"created-after", after, &f.CreatedAfter}, {"created-before", before, &f.CreatedBefore}} {
				if t.v == "" {
					continue
				}
				tm, err := time.Parse(time.RFC3339Nano, t.v)
				if err != nil {
					return cli.Usage("--%s: an RFC 3339 time with its zone, e.g. 2026-12-01T17:00:00Z", t.flag)
				}
				*t.to = tm
			}
			if !explicit("region") {
				f.Region = "" // an AX_REGION exported for another command must not hide the other regions
			}
			if !explicit("tenant") {
				f.Tenant = ""
			}
			res, err := env.API.ListTasks(ctx, f)
			if err != nil {
				return err
			}
			if err := env.Show(res, func(w *tabwriter.Writer) { render.TaskRows(w, res.Tasks, env.Loc) }); err != nil {
				return err
			}
			if !env.JSON && res.NextCursor != "" {
				fmt.Fprintf(env.Stderr, "(%d shown; more with --cursor %s)\n", len(res.Tasks), res.NextCursor)
			}
			return env.Partial(res.Regions, res.Unavailable)
		}),
	}
	explicit = cli.TrackExplicit(c)
	c.Flags().StringVar(&state, "state", "", "only tasks in this state (PENDING, HANDED_OFF, READY, RUNNING, SUCCESS, FAILED, CANCELED)")
	c.Flags().StringVar(&f.Type, "type", "", "only tasks of this type")
	c.Flags().StringVar(&f.Tenant, "tenant", "", "only tasks of this tenant")
	c.Flags().StringVar(&f.Pool, "pool", "", "only tasks placed on this pool")
	c.Flags().StringVar(&f.Region, "region", "", "only tasks held in this region (default: every region)")
	c.Flags().StringVar(&f.LimitKey, "limit-key", "", "only tasks naming this concurrency limit key")
	c.Flags().StringVar(&after, "created-after", "", "only tasks created at or after this time (RFC 3339)")
	c.Flags().StringVar(&before, "created-before", "", "only tasks created before this time (RFC 3339)")
	c.Flags().StringVar(&f.Payload, "payload", "", "only tasks whose payload JSON contains this text (operator tokens)")
	c.Flags().IntVar(&f.Limit, "limit", 50, "at most this many")
	c.Flags().StringVar(&f.Cursor, "cursor", "", "continue after the previous page (its next cursor)")
	return cliCommand(c)
}

func newTrailCmd() *cobra.Command {
	return cliCommand(&cobra.Command{
		Use:   "trail ID",
		Short: "Show a task's transitions with their reason codes",
		Args:  cobra.ExactArgs(1),
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			tr, err := env.API.Trail(ctx, args[0])
			if err != nil {
				return err
			}
			return env.Show(tr, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "TIME\tREGION\tFROM\tTO\tREASON\tBY\tATTEMPT\tERROR")
				for _, s := range tr.Transitions {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", render.Time(&s.At, env.Loc), render.Or(s.Region), render.Or(string(s.From)), s.To,
						render.Or(s.Reason), render.Or(s.By), s.Attempt, render.Cut(s.Error, 80))
				}
			})
		}),
	})
}

func newCancelCmd() *cobra.Command {
	var (
		filter   struct{ typ, state, tenant, region string }
		explicit func(string) bool
	)
	c := &cobra.Command{
		Use:   "cancel (ID... | --type T --state S --tenant T [--region R])",
		Short: "Cancel tasks by id, or every waiting task matching a filter",
		Long: `Cancel tasks by id. A RUNNING task is asked to stop: its worker stops it at
the next heartbeat. With --type, --state and/or --tenant instead of ids,
cancel every PENDING or READY task that matches all the given filters, in
every region of the federation (or in --region only), and print how many
each region cancelled. A region that did not answer is named on stderr and
the command exits 1; running it again is safe.
The filters are taken from the command line only, never from AX_* env or
the settings file.`,
		Example: `  ax cancel 01J9Z3K6X8
  ax cancel --type report.generate --state READY --tenant acme
  ax cancel --type report.generate --region us-east-1`,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			// Only typed filters count (see cli.TrackExplicit); the others
			// are cleared so the request carries exactly what was typed.
			for name, v := range map[string]*string{"type": &filter.typ, "state": &filter.state, "tenant": &filter.tenant, "region": &filter.region} {
				if !explicit(name) {
					*v = ""
				}
			}
			bulk := filter.typ != "" || filter.state != "" || filter.tenant != ""
			switch {
			case bulk && len(args) > 0:
				return cli.Usage("give task ids or a filter (--type, --state, --tenant), not both")
			case !bulk && filter.region != "":
				return cli.Usage("--region limits a bulk cancel: give --type, --state or --tenant too")
			case bulk:
				state := task.State(strings.ToUpper(filter.state))
				if state != "" && state != task.Pending && state != task.Ready {
					return cli.Usage("--state %q: want PENDING or READY (cancel running tasks by id)", filter.state)
				}
				res, err := env.API.BulkCancel(ctx, apiv1.BulkCancelRequest{Type: filter.typ, State: state, Tenant: filter.tenant, Region: filter.region})
				if err != nil {
					return err
				}
				err = env.Show(res, func(w *tabwriter.Writer) {
					if len(res.Regions) > 0 {
						fmt.Fprintln(w, "REGION\tCANCELED")
						for _, r := range res.Regions {
							n := strconv.Itoa(r.Count)
							if r.Error != nil {
								n = "unavailable"
							}
							fmt.Fprintf(w, "%s\t%s\n", r.Region, n)
						}
					}
					fmt.Fprintf(w, "canceled %d tasks\n", res.Canceled)
				})
				if err != nil {
					return err
				}
				return env.Partial(res.Regions, res.Unavailable)
			case len(args) == 0:
				return cli.Usage("give task ids or a filter (--type, --state, --tenant)")
			}
			var done []*apiv1.CancelResponse
			err := env.Each(args, func(id string) error {
				res, err := env.API.Cancel(ctx, id)
				if err == nil {
					done = append(done, res)
				}
				return err
			})
			if perr := cli.ShowEach(env, done, len(args), func(w *tabwriter.Writer) {
				for _, r := range done {
					note := ""
					switch {
					case r.Requested && r.State == task.Pending:
						note = "cancel requested: its hand-off to another region carries it there"
					case r.Requested:
						note = "cancel requested: the worker stops it at its next heartbeat"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\n", r.ID, r.State, note)
				}
			}); perr != nil {
				return perr
			}
			return err
		}),
	}
	explicit = cli.TrackExplicit(c)
	c.Flags().StringVar(&filter.typ, "type", "", "bulk: cancel tasks of this type")
	c.Flags().StringVar(&filter.state, "state", "", "bulk: cancel tasks in this state (PENDING or READY)")
	c.Flags().StringVar(&filter.tenant, "tenant", "", "bulk: cancel tasks of this tenant")
	c.Flags().StringVar(&filter.region, "region", "", "bulk: cancel in this region only (default: every region)")
	return cliCommand(c)
}

func newPriorityCmd() *cobra.Command {
	return cliCommand(&cobra.Command{
		Use:   "priority ID P",
		Short: fmt.Sprintf("Change a live (PENDING, READY or RUNNING) task's priority: 0 (highest) to %d (lowest)", task.MaxPriority),
		Long: fmt.Sprintf(`Change a live task's priority: 0 (highest) to %d (lowest), operator tokens only.

A PENDING or READY task waits at its new priority and keeps its place in time.
A RUNNING task keeps running: the new priority is the one preemption weighs
and the one a retry of it waits at. A finished task (SUCCESS, FAILED,
CANCELED) is refused (409 failed_precondition, field state): replay a dead
letter first.`, task.MaxPriority),
		Args: cobra.ExactArgs(2),
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			p, err := strconv.Atoi(args[1])
			if err != nil || p < 0 || p > task.MaxPriority {
				return cli.Usage("priority %q: want an integer from 0 (highest) to %d (lowest)", args[1], task.MaxPriority)
			}
			res, err := env.API.SetPriority(ctx, args[0], p)
			if err != nil {
				return err
			}
			return env.Show(res, func(w *tabwriter.Writer) {
				note := ""
				if res.State == task.Running {
					note = " (keeps running: preemption and a retry use it)"
				}
				fmt.Fprintf(w, "%s\t%s\tpriority %d%s\n", res.ID, res.State, p, note)
			})
		}),
	})
}

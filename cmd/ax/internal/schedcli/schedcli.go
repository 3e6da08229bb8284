package schedcli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"github.com/spf13/cobra"
)

// Commands are backfill, rerun, backfills and cancel-backfill.
func Commands() []*cobra.Command {
	var from, to, periodFlag string
	var maxActive int
	var wait, downstream bool
	backfill := &cobra.Command{
		Use:   "backfill NAME --from T --to T [--max-active N] [--wait]",
		Short: "Run a schedule's periods in a range, oldest first, at most N at once",
		Long: `Run a schedule's periods in a range, oldest first, at most --max-active at once.

--from and --to are RFC 3339 times or dates (2006-01-02: midnight in the
schedule's zone); every slot s with from <= s <= to is a period to run. A
period that has a run already is not run again (ax schedule rerun does).
The federation leader runs the backfill; --wait follows it to its end.`,
		Args: cobra.ExactArgs(1),
	}
	backfillTyped := cli.TrackExplicit(backfill)
	backfill.RunE = cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
		bf, err := env.API.Backfills().Start(ctx, tenantOf(backfill, backfillTyped), args[0], apiv1.BackfillRequest{From: from, To: to, MaxActive: maxActive})
		if err != nil {
			return err
		}
		if wait {
			if bf, err = follow(ctx, env, tenantOf(backfill, backfillTyped), args[0], bf.ID); err != nil {
				return err
			}
		}
		return show(env, bf)
	})
	backfill.Flags().StringVar(&from, "from", "", "the first period's start (RFC 3339 or 2006-01-02)")
	backfill.Flags().StringVar(&to, "to", "", "the last period's start (RFC 3339 or 2006-01-02)")
	backfill.Flags().IntVar(&maxActive, "max-active", 1, "runs at once (1 to 100)")
	backfill.Flags().BoolVar(&wait, "wait", false, "follow the backfill until every period ran")

	rerun := &cobra.Command{
		Use:   "rerun NAME --period T [--downstream]",
		Short: "Run one period of a schedule again, under a new run id",
		Long: `Run one period of a schedule again, under a new run id.

With --downstream the schedules that depend on it, directly or through
others, are rerun too, for their periods that start within a rerun period
(the runs whose same_period gates name it); their
runs' gates on a schedule rerun with them wait for that schedule's rerun of
the period, not for its earlier success. A cycle between the schedules is
refused (409, naming the path).`,
		Args: cobra.ExactArgs(1),
	}
	rerunTyped := cli.TrackExplicit(rerun)
	rerun.RunE = cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
		bf, err := env.API.Backfills().Rerun(ctx, tenantOf(rerun, rerunTyped), args[0], apiv1.RerunRequest{Period: periodFlag, Downstream: downstream})
		if err != nil {
			return err
		}
		return show(env, bf)
	})
	rerun.Flags().StringVar(&periodFlag, "period", "", "the period's start, a slot of the schedule (RFC 3339 or 2006-01-02)")
	rerun.Flags().BoolVar(&downstream, "downstream", false, "rerun the schedules depending on it too, each after its upstream's rerun")

	list := &cobra.Command{
		Use:   "backfills NAME",
		Short: "List a schedule's backfills and reruns with the runs they started",
		Args:  cobra.ExactArgs(1),
	}
	listTyped := cli.TrackExplicit(list)
	list.RunE = cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
		res, err := env.API.Backfills().List(ctx, tenantOf(list, listTyped), args[0])
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintJSON(res)
		}
		for _, bf := range res.Backfills {
			if err := show(env, &bf); err != nil {
				return err
			}
		}
		return nil
	})
	cancel := &cobra.Command{
		Use:   "cancel-backfill NAME ID",
		Short: "Cancel a backfill or rerun: no period of it starts any more, its active runs stop",
		Args:  cobra.ExactArgs(2),
	}
	cancelTyped := cli.TrackExplicit(cancel)
	cancel.RunE = cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
		bf, err := env.API.Backfills().Cancel(ctx, tenantOf(cancel, cancelTyped), args[0], args[1])
		if err != nil {
			return err
		}
		return show(env, bf)
	})
	cmds := []*cobra.Command{backfill, rerun, list, cancel}
	for _, c := range cmds {
		c.Flags().String("tenant", "", tenantHelp)
	}
	return cmds
}

// follow reads the backfill id until it is no longer RUNNING.
func follow(ctx context.Context, env *cli.Env, tenant, name, id string) (*apiv1.Backfill, error) {
	for {
		res, err := env.API.Backfills().List(ctx, tenant, name)
		if err != nil {
			return nil, err
		}
		for _, bf := range res.Backfills {
			if bf.ID == id && bf.State != apiv1.BackfillRunning {
				return &bf, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// show prints a backfill: a header line, the reruns it made downstream
// or waits for, then one line per period started (with the upstream runs
// its gates wait for).
func show(env *cli.Env, bf *apiv1.Backfill) error {
	if env.JSON {
		return env.PrintJSON(bf)
	}
	kind := "backfill"
	if bf.Rerun {
		kind = "rerun"
	}
	fmt.Fprintf(env.Stdout, "%s %s of %s: %s, %d of %d periods started, %d active (max %d)\n", kind, bf.ID, bf.Schedule,
		bf.State, len(bf.Runs), bf.Periods, len(bf.Active), bf.MaxActive)
	for _, d := range bf.Downstream {
		fmt.Fprintf(env.Stdout, "  downstream: rerun %s of %s\n", d.ID, d.Schedule)
	}
	for _, wt := range bf.WaitsFor {
		start := wt.Period.Start.In(env.Loc)
		fmt.Fprintf(env.Stdout, "  waits for %s's rerun %s: run %s of %s\n", wt.Schedule, wt.Rerun, wt.RunID, render.Time(&start, env.Loc))
	}
	w := render.Table(env.Stdout)
	for _, r := range bf.Runs {
		start, end := r.Period.Start.In(env.Loc), r.Period.End.In(env.Loc)
		waits := ""
		if len(r.WaitsFor) > 0 {
			waits = "\twaits for " + strings.Join(r.WaitsFor, ", ")
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s%s\n", render.Time(&start, env.Loc), render.Time(&end, env.Loc), r.ID, r.Outcome, waits)
	}
	return w.Flush()
}

// tenantOf is c's --tenant when typed on its command line (typed: from
// cli.TrackExplicit), else "": an exported AX_TENANT must not address
// another namespace.
func tenantOf(c *cobra.Command, typed func(string) bool) string {
	if !typed("tenant") {
		return ""
	}
	v, _ := c.Flags().GetString("tenant")
	return strings.TrimSpace(v)
}

// Actions are pause, resume and delete NAME. With -o json each prints the
// server's answer, or {"name":..., "<done>":true} when the answer is
// empty, so scripts always get JSON.
func Actions() []*cobra.Command {
	type call func(api *client.Client, ctx context.Context, tenant, name string) (json.RawMessage, error)
	var out []*cobra.Command
	for _, a := range []struct {
		use, short, done string
		call             call
	}{
		{"pause", "Stop a schedule from firing", "paused", (*client.Client).PauseScheduleOf},
		{"resume", "Let a paused schedule fire again", "resumed", (*client.Client).ResumeScheduleOf},
		{"delete", "Delete a schedule", "deleted", func(api *client.Client, ctx context.Context, tenant, name string) (json.RawMessage, error) {
			return nil, api.DeleteScheduleOf(ctx, tenant, name)
		}},
	} {
		c := &cobra.Command{Use: a.use + " NAME", Short: a.short, Args: cobra.ExactArgs(1)}
		typed := cli.TrackExplicit(c)
		c.RunE = cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			res, err := a.call(env.API, ctx, tenantOf(c, typed), args[0])
			if err != nil {
				return err
			}
			if env.JSON {
				if len(res) == 0 {
					return env.PrintJSON(map[string]any{"name": args[0], a.done: true})
				}
				return env.PrintJSON(res)
			}
			fmt.Fprintf(env.Stdout, "schedule %s %s\n", args[0], a.done)
			return nil
		})
		c.Flags().String("tenant", "", tenantHelp)
		out = append(out, c)
	}
	return out
}

const tenantHelp = "the schedule's tenant (default: the token's; needed by a token of every tenant when two tenants use the name)"

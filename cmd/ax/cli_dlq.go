package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/federation/apiv1"
)

func init() { commands = append(commands, newDLQCmd) }

func newDLQCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "Dead letters: tasks that failed for good",
	}
	c.AddCommand(newDLQListCmd(), newDLQReplayCmd())
	return c
}

func newDLQListCmd() *cobra.Command {
	var f client.DeadLetterFilter
	c := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, newest first",
		Args:  cobra.NoArgs,
		RunE: cliRun(func(ctx context.Context, env *cliEnv, _ []string) error {
			if f.Limit < 1 || f.Offset < 0 {
				return cliUsage("--limit must be at least 1 and --offset not negative")
			}
			res, err := env.api.DeadLetters(ctx, f)
			if err != nil {
				return err
			}
			err = env.show(res, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tTYPE\tTENANT\tATTEMPTS\tFAILED\tLAST ERROR")
				for _, t := range res.Tasks {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", t.ID, t.Type, cliOr(t.Tenant), t.Attempts,
						cliTime(t.FinishedAt), cliOr(cliCut(t.LastError, 60)))
				}
			})
			if err == nil && !env.json && len(res.Tasks) == f.Limit {
				fmt.Fprintf(env.stderr, "(%d shown; more with --offset %d)\n", len(res.Tasks), f.Offset+f.Limit)
			}
			return err
		}),
	}
	c.Flags().StringVar(&f.Type, "type", "", "only tasks of this type")
	c.Flags().StringVar(&f.Tenant, "tenant", "", "only tasks of this tenant")
	c.Flags().IntVar(&f.Limit, "limit", 50, "at most this many")
	c.Flags().IntVar(&f.Offset, "offset", 0, "skip this many")
	return cliCommand(c)
}

func newDLQReplayCmd() *cobra.Command {
	return cliCommand(&cobra.Command{
		Use:   "replay ID...",
		Short: "Put dead letters back to PENDING, to run again",
		Args:  cobra.MinimumNArgs(1),
		RunE: cliRun(func(ctx context.Context, env *cliEnv, args []string) error {
			var done []*apiv1.TaskUpdate
			err := env.each(args, func(id string) error {
				res, err := env.api.Replay(ctx, id)
				if err == nil {
					done = append(done, res)
				}
				return err
			})
			if perr := cliShowEach(env, done, len(args), func(w *tabwriter.Writer) {
				for _, r := range done {
					fmt.Fprintf(w, "%s\t%s\treplayed\n", r.ID, r.State)
				}
			}); perr != nil {
				return perr
			}
			return err
		}),
	})
}

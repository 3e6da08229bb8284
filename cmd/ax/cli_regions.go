package main

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newRegionsCmd() *cobra.Command {
	return cliCommand(&cobra.Command{
		Use:   "regions",
		Short: "Show regions, their providers, leaders and pools: slots, load, parked and starving tasks, queue fill, price",
		Args:  cobra.NoArgs,
		RunE: cliRun(func(ctx context.Context, env *cliEnv, _ []string) error {
			res, err := env.api.Regions(ctx)
			if err != nil {
				return err
			}
			if !res.GlobalView && !env.json {
				fmt.Fprintln(env.stderr, "warning: the server cannot reach the global etcd; this is its last known view")
			}
			return env.show(res, func(w *tabwriter.Writer) { render.Regions(w, res) })
		}),
	})
}

func newRegionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "region",
		Short: "Operate on one region",
	}
	c.AddCommand(cliCommand(&cobra.Command{
		Use:   "drain REGION",
		Short: "Move a region's READY tasks to other regions",
		Args:  cobra.ExactArgs(1),
		RunE: cliRun(func(ctx context.Context, env *cliEnv, args []string) error {
			res, err := env.api.Drain(ctx, args[0])
			if err != nil {
				return err
			}
			return env.show(res, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "drained %s: %d READY tasks moved\n", res.Region, res.Moved)
			})
		}),
	}))
	return c
}

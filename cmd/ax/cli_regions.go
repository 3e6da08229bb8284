package main

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newRegionsCmd() *cobra.Command {
	return cliCommand(&cobra.Command{
		Use:   "regions",
		Short: "Show regions, their providers, leaders and pools: slots, load, parked and starving tasks, queue fill, price",
		Args:  cobra.NoArgs,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			res, err := env.API.Regions(ctx)
			if err != nil {
				return err
			}
			if !res.GlobalView && !env.JSON {
				fmt.Fprintln(env.Stderr, "warning: the server cannot reach the global etcd; this is its last known view")
			}
			return env.Show(res, func(w *tabwriter.Writer) { render.Regions(w, res) })
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
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			res, err := env.API.Drain(ctx, args[0])
			if err != nil {
				return err
			}
			return env.Show(res, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "drained %s: %d READY tasks moved\n", res.Region, res.Moved)
			})
		}),
	}))
	return c
}

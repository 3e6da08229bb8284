package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/apiv1"
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
			return env.show(res, func(w *tabwriter.Writer) { writeRegions(w, res) })
		}),
	})
}

// writeRegions prints one row per pool; a region without pools gets one
// row of its own.
func writeRegions(w *tabwriter.Writer, res *apiv1.RegionsResponse) {
	fmt.Fprintln(w, "REGION\tPROVIDER\tLEADER\tSERVERS\tHEALTHY\tPOOL\tSLOTS\tRUNNING\tREADY\tPARKED\tSTARVING\tFILL\tPRICE $/SLOT-H\tSPOT")
	for _, r := range res.Regions {
		health := "yes"
		switch {
		case r.Stale:
			health = "stale"
		case !r.Healthy:
			health = "no"
		}
		if len(r.Pools) == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", r.Name, cliOr(r.Provider), cliOr(r.Leader), r.Servers, health)
		}
		for _, p := range r.Pools {
			fill := fmt.Sprintf("%.1f%%", 100*p.QueueFill)
			if p.Paused {
				fill += " paused"
			}
			spot := "no"
			if p.Spot {
				spot = "yes"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%.3f\t%s\n", r.Name, cliOr(r.Provider), cliOr(r.Leader), r.Servers, health,
				p.Name, p.Slots, p.Running, p.Ready, p.Parked, p.Starving, fill, p.PricePerSlotHour, spot)
		}
	}
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

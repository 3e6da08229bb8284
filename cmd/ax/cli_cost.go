package main

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
)

func newCostCmd() *cobra.Command {
	var (
		f        client.CostFilter
		groupBy  string
		explicit func(string) bool
	)
	c := &cobra.Command{
		Use:   "cost",
		Short: "Spend, savings and spot use of the attempts every region ran, by tenant, type, pool, region or day",
		Long: `Report what the attempts that ended (succeeded or failed) cost, gathered
from every region by the server you ask: each attempt is counted in the
region that ran it, at the price per slot-hour recorded when it was claimed
× its run time. SAVINGS is what the same run time would have cost on the
cheapest on-demand pool (any region) that carries the task's tags, minus
the spend (negative: dearer than that pool); docs/cost.md says precisely
how. A tenant's token sees its own tenant only: --tenant naming another is
refused (403, exit 1). A region that did not answer is named on stderr and
the command exits 1 after printing the rest. --region and --tenant are
taken from the command line only.`,
		Example: `  ax cost                                  # this month, by tenant and pool
  ax cost --from 2026-11-01 --to 2026-11-30 --group-by tenant,type,region
  ax cost --group-by day -o json`,
		Args: cobra.NoArgs,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			if !explicit("region") {
				f.Region = ""
			}
			if !explicit("tenant") {
				f.Tenant = "" // an AX_TENANT exported for submits must not narrow (or refuse) the report
			}
			f.GroupBy = nil
			for _, g := range strings.Split(groupBy, ",") {
				if g = strings.TrimSpace(g); g != "" {
					f.GroupBy = append(f.GroupBy, g)
				}
			}
			if explicit("group-by") && f.GroupBy == nil {
				f.GroupBy = []string{}
			}
			res, err := env.API.Cost(ctx, f)
			if err != nil {
				return err
			}
			err = env.Show(res, func(w *tabwriter.Writer) {
				head := make([]string, 0, len(res.GroupBy)+7)
				for _, g := range res.GroupBy {
					head = append(head, strings.ToUpper(g))
				}
				fmt.Fprintln(w, strings.Join(append(head, "RUNS", "FAILED", "RUN TIME", "SPEND", "ON-DEMAND", "SAVINGS", "SPOT RUNS", "SPOT TIME"), "\t"))
				if len(res.GroupBy) > 0 {
					for _, r := range res.Rows {
						fmt.Fprintln(w, render.CostLine(res.GroupBy, r, false))
					}
				}
				fmt.Fprintln(w, render.CostLine(res.GroupBy, res.Total, true))
				for _, b := range res.Budgets {
					past := "refused"
					if b.OverBudget == "cap" {
						past = "only pools ≤ " + render.USD(b.PriceCap) + "/slot-hour"
					}
					fmt.Fprintf(w, "budget %s: %s of %s this month (%.0f %%, %s; past 100 %%: %s)\n",
						b.Tenant, render.USD(b.SpentUSD), render.USD(b.MonthlyBudgetUSD), b.UsedRatio*100, b.State, past)
				}
			})
			if err != nil {
				return err
			}
			if !env.JSON {
				fmt.Fprintf(env.Stderr, "(%s to %s, UTC days; ON-DEMAND: the same run time on the cheapest on-demand pool that fits)\n", res.From, res.To)
			}
			return env.Partial(res.Regions, res.Unavailable)
		}),
	}
	explicit = cli.TrackExplicit(c)
	c.Flags().StringVar(&f.From, "from", "", "first UTC day, YYYY-MM-DD (default: the first of this month)")
	c.Flags().StringVar(&f.To, "to", "", "last UTC day, YYYY-MM-DD, inclusive (default: today)")
	c.Flags().StringVar(&groupBy, "group-by", "tenant,pool", "dimensions, comma-separated: "+strings.Join(apiv1.CostGroups, ","))
	c.Flags().StringVar(&f.Tenant, "tenant", "", "only this tenant")
	c.Flags().StringVar(&f.Region, "region", "", "only the attempts this region ran (default: every region)")
	return cliCommand(c)
}

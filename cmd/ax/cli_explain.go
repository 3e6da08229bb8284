package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

func newExplainCmd() *cobra.Command {
	var (
		sf       specFlags
		file     string
		explicit func(string) bool
	)
	c := &cobra.Command{
		Use:   "explain (--type T [flags] | -f spec.json)",
		Short: "Dry-run placement: every candidate pool, its cost and why it was or was not chosen",
		Long: `Ask where a task would be placed now, without submitting it. Every pool is
listed: eligible ones with price, expected duration, cost per task, watermark
penalty and score (lowest wins, marked with *), rejected ones with their
reason code and the figure behind it. Figures are printed at full precision
(a task can cost $0.000000123). Exits 1 when the task could not be
submitted now (UNPLACEABLE: 422; SATURATED: 429), after printing why.`,
		Example: `  ax explain --type render.frame --tag gpu=a100
  ax explain -f spec.json`,
		Args: cobra.NoArgs,
		RunE: cliRun(func(ctx context.Context, env *cliEnv, _ []string) error {
			var spec *task.Spec
			if file != "" {
				if name, ok := sf.typed(explicit); ok {
					return cliUsage("give -f or --%s (spec flags), not both", name)
				}
				raw, err := env.readJSONFile(file)
				if err != nil {
					return err
				}
				if spec, err = decodeSpecLine(raw); err != nil {
					return cliUsage("%s: %s", cliInputName(file), cliFieldError(err))
				}
			} else {
				var err error
				if spec, err = sf.spec(env); err != nil {
					return err
				}
			}
			ex, err := env.api.Explain(ctx, spec)
			if err != nil {
				return err
			}
			if err := env.show(ex, func(w *tabwriter.Writer) { writeExplanation(w, ex) }); err != nil {
				return err
			}
			switch ex.Outcome {
			case "UNPLACEABLE":
				return fmt.Errorf("unplaceable: no pool in any region can take this task (STATUS says why for each)")
			case "SATURATED":
				return fmt.Errorf("saturated: every eligible pool refuses it now (a submit gets 429)")
			}
			return nil
		}),
	}
	explicit = cliTrackExplicit(c)
	sf.register(c.Flags())
	c.Flags().StringVarP(&file, "file", "f", "", "JSON file with one spec (- for stdin)")
	return cliCommand(c)
}

// writeExplanation prints every candidate: the chosen first, then the
// eligible by score, then the rejected in the server's order; and the
// outcome.
func writeExplanation(w *tabwriter.Writer, ex *apiv1.Explanation) {
	cands := append([]apiv1.Candidate(nil), ex.Candidates...)
	rank := func(c apiv1.Candidate) int {
		switch {
		case c.Chosen:
			return 0
		case c.Rejected == "":
			return 1
		}
		return 2
	}
	sort.SliceStable(cands, func(i, j int) bool {
		ri, rj := rank(cands[i]), rank(cands[j])
		if ri != rj {
			return ri < rj
		}
		return ri == 1 && cands[i].Score < cands[j].Score
	})
	fmt.Fprintln(w, "\tREGION\tPOOL\tPRICE\tEXP.DURATION\tCOST\tPENALTY\tSCORE\tSTATUS")
	for _, c := range cands {
		mark, status := "", "ok"
		switch {
		case c.Chosen:
			mark, status = "*", "CHOSEN"
		case c.Rejected != "":
			status = c.Rejected
		}
		if c.Detail != "" {
			status += ": " + c.Detail
		}
		// A rejected pool has score parts only when it passed the filters
		// before saturation (it shows what it would have cost).
		scored := c.Rejected == "" || c.Score > 0
		dur, cost, pen, score := "-", "-", "-", "-"
		if scored {
			dur = expectedDuration(c)
			cost = usd(c.BaseCost) + "/task"
			pen = "×" + strconv.FormatFloat(c.Penalty, 'g', 4, 64)
			if c.CrossRegion > 0 {
				pen += " +" + usd(c.CrossRegion)
			}
			score = usd(c.Score)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s/h\t%s\t%s\t%s\t%s\t%s\n", mark, c.Region, c.Pool, usd(c.PricePerSlotHour), dur, cost, pen, score, status)
	}
	switch {
	case ex.Chosen != nil:
		fmt.Fprintf(w, "outcome: %s in %s/%s (score %s)\n", ex.Outcome, ex.Chosen.Region, ex.Chosen.Pool, usd(ex.Chosen.Score))
	case ex.Outcome == "":
		fmt.Fprintln(w, "outcome: no pool chosen")
	default:
		fmt.Fprintf(w, "outcome: %s\n", ex.Outcome)
	}
}

// expectedDuration is a candidate's expected duration and where it came
// from: "4m0s (learnt, 312 runs)", "1s (default)".
func expectedDuration(c apiv1.Candidate) string {
	d := time.Duration(c.ExpectedSeconds * float64(time.Second))
	if d < 10*time.Second {
		d = d.Round(time.Millisecond)
	} else {
		d = d.Round(time.Second)
	}
	switch c.EstimateSource {
	case "":
		return d.String()
	case "default":
		return d.String() + " (default)"
	}
	return fmt.Sprintf("%s (%s, %d runs)", d, c.EstimateSource, c.Observations)
}

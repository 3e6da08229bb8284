package main

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"text/tabwriter"

	"github.com/spf13/cobra"

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
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			var spec *task.Spec
			if file != "" {
				if name, ok := sf.typed(explicit); ok {
					return cli.Usage("give -f or --%s (spec flags), not both", name)
				}
				raw, err := env.ReadJSONFile(file)
				if err != nil {
					return err
				}
				if spec, err = decodeSpecLine(raw); err != nil {
					return cli.Usage("%s: %s", cli.InputName(file), cliFieldError(err))
				}
			} else {
				var err error
				if spec, err = sf.spec(env); err != nil {
					return err
				}
			}
			ex, err := env.API.Explain(ctx, spec)
			if err != nil {
				return err
			}
			if err := env.Show(ex, func(w *tabwriter.Writer) { render.Explanation(w, ex) }); err != nil {
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
	explicit = cli.TrackExplicit(c)
	sf.register(c.Flags())
	c.Flags().StringVarP(&file, "file", "f", "", "JSON file with one spec (- for stdin)")
	return cliCommand(c)
}

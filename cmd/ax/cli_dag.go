package main

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
	"github.com/spf13/cobra"
)

func newDAGCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "dag",
		Short: "DAG runs: tasks with dependencies",
	}
	var file string
	submit := &cobra.Command{
		Use:   "submit -f dag.json",
		Short: "Start a DAG run (nodes with id and depends_on; cycles are rejected)",
		Long: `Start a DAG run in the region of the server that accepts it (its home).

Each node has an id (lowercase letters, digits, - and _), depends_on (ids of
other nodes), an optional trigger_rule (all_success, the default; all_done;
one_failed) and its task spec under "task", as ax submit would send it:

  {"name": "nightly",
   "nodes": [
     {"id": "extract", "task": {"type": "etl.extract", "tags": {"class": "spot"}}},
     {"id": "load", "depends_on": ["extract"], "task": {"type": "etl.load"}},
     {"id": "alert", "depends_on": ["load"], "trigger_rule": "one_failed",
      "task": {"type": "notify.page"}}]}

Prints the run's id; ax dag get ID shows every node, ax dag cancel ID stops the run.`,
		Args: cobra.NoArgs,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			body, err := env.ReadJSONFile(file)
			if err != nil {
				return err
			}
			res, err := env.API.SubmitDAG(ctx, body)
			if err != nil {
				return err
			}
			if id := render.RawField(res, "id"); id != "" && !env.JSON {
				fmt.Fprintln(env.Stdout, id)
				return nil
			}
			return env.PrintJSON(res)
		}),
	}
	submit.Flags().StringVarP(&file, "file", "f", "", "DAG definition, JSON (- for stdin)")
	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show a DAG run and its nodes",
		Args:  cobra.ExactArgs(1),
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			res, err := env.API.GetDAG(ctx, args[0])
			if err != nil {
				return err
			}
			if env.JSON || !render.DAG(env.Stdout, res) {
				return env.PrintJSON(res)
			}
			return nil
		}),
	}
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a DAG run: waiting nodes never run, released tasks are cancelled",
		Long: `Cancel a DAG run. Its WAITING nodes end CANCELED (CANCELED_BY_USER) at once
and are never released; the task of every released node is cancelled (a
RUNNING one is asked to stop: its worker stops it at its next heartbeat);
nodes that already ended stay as they are. The run ends CANCELED once every
node settled. Cancelling again, or cancelling a run that already ended,
changes nothing and says what is.`,
		Args: cobra.ExactArgs(1),
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
			res, err := env.API.CancelDAG(ctx, args[0])
			if err != nil {
				return err
			}
			if env.JSON || !render.DAGCancel(env.Stdout, args[0], res) {
				return env.PrintJSON(res)
			}
			return nil
		}),
	}
	c.AddCommand(cliCommand(submit), cliCommand(get), cliCommand(cancel), cliCommand(newDAGListCmd()))
	return c
}

func newDAGListCmd() *cobra.Command {
	var f apiv1.DAGFilter
	var state string
	var explicit func(string) bool
	c := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List DAG runs of every region, newest first, by name, state or tenant",
		Long: `List DAG runs, newest first, gathered from every home region by the server
you ask. A tenant's token lists only its tenant's runs (--tenant naming
another is refused, 403). A region that did not answer is named on stderr
and the command exits 1 after printing what the others gave. --tenant is
taken from the command line only.`,
		Example: `  ax dag ls --state RUNNING
  ax dag ls --name nightly --limit 5 --cursor <next cursor printed by the previous page>`,
		Args: cobra.NoArgs,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			if f.Limit < 1 {
				return cli.Usage("--limit must be at least 1")
			}
			f.State = task.DAGState(strings.ToUpper(state))
			if !explicit("tenant") {
				f.Tenant = ""
			}
			res, err := env.API.ListDAGs(ctx, f)
			if err != nil {
				return err
			}
			err = env.Show(res, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tNAME\tSTATE\tTENANT\tHOME\tNODES\tCREATED")
				for _, r := range res.Runs {
					var parts []string
					for st, n := range r.Nodes {
						parts = append(parts, fmt.Sprintf("%d %s", n, st))
					}
					slices.Sort(parts)
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, render.Or(r.Name), r.State, render.Or(r.Tenant), r.Region,
						render.Or(strings.Join(parts, ", ")), render.Time(&r.CreatedAt, env.Loc))
				}
			})
			if err != nil {
				return err
			}
			if !env.JSON && res.NextCursor != "" {
				fmt.Fprintf(env.Stderr, "(%d shown; more with --cursor %s)\n", len(res.Runs), res.NextCursor)
			}
			return env.Partial(res.Regions, res.Unavailable)
		}),
	}
	explicit = cli.TrackExplicit(c)
	c.Flags().StringVar(&f.Name, "name", "", "only runs of this name")
	c.Flags().StringVar(&state, "state", "", "only runs in this state (RUNNING, SUCCESS, FAILED, CANCELED)")
	c.Flags().StringVar(&f.Tenant, "tenant", "", "only runs of this tenant")
	c.Flags().IntVar(&f.Limit, "limit", 50, "at most this many")
	c.Flags().StringVar(&f.Cursor, "cursor", "", "continue after the previous page (its next cursor)")
	return c
}

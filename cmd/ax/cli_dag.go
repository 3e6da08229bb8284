package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newDAGCmd) }

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

Prints the run's id; ax dag get ID shows every node.`,
		Args: cobra.NoArgs,
		RunE: cliRun(func(ctx context.Context, env *cliEnv, _ []string) error {
			body, err := env.readJSONFile(file)
			if err != nil {
				return err
			}
			res, err := env.api.SubmitDAG(ctx, body)
			if err != nil {
				return err
			}
			if id := rawField(res, "id"); id != "" && !env.json {
				fmt.Fprintln(env.stdout, id)
				return nil
			}
			return env.printJSON(res)
		}),
	}
	submit.Flags().StringVarP(&file, "file", "f", "", "DAG definition, JSON (- for stdin)")
	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show a DAG run and its nodes",
		Args:  cobra.ExactArgs(1),
		RunE: cliRun(func(ctx context.Context, env *cliEnv, args []string) error {
			res, err := env.api.GetDAG(ctx, args[0])
			if err != nil {
				return err
			}
			if env.json || !writeDAG(env.stdout, res) {
				return env.printJSON(res)
			}
			return nil
		}),
	}
	c.AddCommand(cliCommand(submit), cliCommand(get))
	return c
}

// writeDAG prints a DAG run as a node table when it has the expected shape
// ({id, state, nodes:[{id, state, reason, task_id, task_state, region, pool,
// depends_on}]}); false otherwise.
func writeDAG(out io.Writer, raw json.RawMessage) bool {
	var d struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		State string `json:"state"`
		Nodes []struct {
			ID        string   `json:"id"`
			State     string   `json:"state"`
			Reason    string   `json:"reason"`
			TaskID    string   `json:"task_id"`
			TaskState string   `json:"task_state"`
			Region    string   `json:"region"`
			Pool      string   `json:"pool"`
			DependsOn []string `json:"depends_on"`
		} `json:"nodes"`
	}
	if json.Unmarshal(raw, &d) != nil || d.ID == "" || len(d.Nodes) == 0 || d.Nodes[0].ID == "" {
		return false
	}
	w := cliTable(out)
	fmt.Fprintf(w, "DAG %s\t%s\t%s\n\n", d.ID, cliOr(d.State), d.Name)
	fmt.Fprintln(w, "NODE\tSTATE\tTASK\tTASK STATE\tWHERE\tDEPENDS ON")
	for _, n := range d.Nodes {
		deps := "-"
		if len(n.DependsOn) > 0 {
			deps = fmt.Sprint(n.DependsOn)
		}
		st := cliOr(n.State)
		if n.Reason != "" && n.State != "SUCCESS" {
			st += " (" + n.Reason + ")"
		}
		where := "-"
		if n.Region != "" {
			where = n.Region + "/" + cliOr(n.Pool)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, st, cliOr(n.TaskID), cliOr(n.TaskState), where, deps)
	}
	return w.Flush() == nil
}

// rawField is a top-level string field of a JSON object, "" when absent.
func rawField(raw json.RawMessage, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}

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
		Args:  cobra.NoArgs,
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
// ({id, state, nodes:[{id, state, task_id, depends_on}]}); false otherwise.
func writeDAG(out io.Writer, raw json.RawMessage) bool {
	var d struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Nodes []struct {
			ID        string   `json:"id"`
			State     string   `json:"state"`
			TaskID    string   `json:"task_id"`
			DependsOn []string `json:"depends_on"`
		} `json:"nodes"`
	}
	if json.Unmarshal(raw, &d) != nil || d.ID == "" || len(d.Nodes) == 0 || d.Nodes[0].ID == "" {
		return false
	}
	w := cliTable(out)
	fmt.Fprintf(w, "DAG %s\t%s\n\n", d.ID, cliOr(d.State))
	fmt.Fprintln(w, "NODE\tSTATE\tTASK\tDEPENDS ON")
	for _, n := range d.Nodes {
		deps := "-"
		if len(n.DependsOn) > 0 {
			deps = fmt.Sprint(n.DependsOn)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", n.ID, cliOr(n.State), cliOr(n.TaskID), deps)
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

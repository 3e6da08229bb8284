// Package complete gives the CLI's shell completion its values: flags with
// a fixed set (--output, --state) complete from it, and regions, pools,
// task ids, dead letters, DAG runs and schedules from the API the command
// would call, with the same --api, --token and settings.
package complete

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/task"
	"github.com/spf13/cobra"
)

// timeout bounds the API calls of one completion: a shell waits for it.
const timeout = 2 * time.Second

// Dial builds the API client cmd would use (its flags, AX_* env and the
// settings file applied).
type Dial func(cmd *cobra.Command) (*client.Client, error)

// values lists the candidates for what is being completed.
type values func(ctx context.Context, api *client.Client) []string

// Register adds value completion to root and every command under it.
func Register(root *cobra.Command, dial Dial) {
	_ = root.RegisterFlagCompletionFunc("output", fixed("table", "json"))
	walk(root, dial)
}

func walk(c *cobra.Command, dial Dial) {
	for _, sub := range c.Commands() {
		walk(sub, dial)
	}
	path := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
	fromAPI := func(v values) cobra.CompletionFunc { return fromAPI(dial, v) }
	for flag, fn := range map[string]cobra.CompletionFunc{"region": fromAPI(regions), "pool": fromAPI(pools), "state": states(path)} {
		if c.LocalNonPersistentFlags().Lookup(flag) != nil && fn != nil {
			_ = c.RegisterFlagCompletionFunc(flag, fn)
		}
	}
	var arg values
	switch {
	case path == "get" || path == "trail" || path == "cancel" || path == "priority":
		arg = tasks
	case path == "dlq replay":
		arg = deadLetters
	case path == "dag get" || path == "dag cancel":
		arg = dagRuns
	case strings.HasPrefix(path, "schedule ") && strings.Contains(c.Use, "NAME"):
		arg = schedules
	}
	if arg == nil || c.ValidArgsFunction != nil {
		return
	}
	first := fromAPI(arg)
	many := path == "cancel" || path == "dlq replay" // more ids; the others take one
	c.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 && !many {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return first(cmd, args, prefix)
	}
}

// states are the --state values of the command at path (nil: none).
func states(path string) cobra.CompletionFunc {
	switch path {
	case "tasks ls":
		return fixed(string(task.Pending), string(task.HandedOff), string(task.Ready), string(task.Running),
			string(task.Success), string(task.Failed), string(task.Canceled))
	case "cancel":
		return fixed(string(task.Pending), string(task.Ready))
	case "dag ls":
		return fixed(string(task.DAGRunning), string(task.DAGSuccess), string(task.DAGFailed), string(task.DAGCanceled))
	}
	return nil
}

func fixed(vs ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range vs {
			if strings.HasPrefix(v, prefix) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// fromAPI completes from v's answer; no answer (no server, a refused
// token) completes nothing rather than files.
func fromAPI(dial Dial, v values) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		api, err := dial(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		var out []cobra.Completion
		for _, s := range v(ctx, api) {
			if strings.HasPrefix(s, prefix) && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func regions(ctx context.Context, api *client.Client) []string {
	var out []string
	if rs, err := api.Regions(ctx); err == nil {
		for _, r := range rs.Regions {
			out = append(out, r.Name)
		}
	}
	return out
}

func pools(ctx context.Context, api *client.Client) []string {
	var out []string
	if rs, err := api.Regions(ctx); err == nil {
		for _, r := range rs.Regions {
			for _, p := range r.Pools {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// tasks are the newest 50 tasks' ids.
func tasks(ctx context.Context, api *client.Client) []string {
	l, err := api.ListTasks(ctx, client.TaskFilter{Limit: 50})
	return ids(l, err)
}

// deadLetters are the newest 50 dead letters' ids.
func deadLetters(ctx context.Context, api *client.Client) []string {
	l, err := api.DeadLetters(ctx, client.DeadLetterFilter{Limit: 50})
	return ids(l, err)
}

func ids(l *apiv1.TaskList, err error) []string {
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range l.Tasks {
		out = append(out, t.ID)
	}
	return out
}

// dagRuns are the newest 50 DAG runs' ids.
func dagRuns(ctx context.Context, api *client.Client) []string {
	l, err := api.ListDAGs(ctx, apiv1.DAGFilter{Limit: 50})
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range l.Runs {
		out = append(out, r.ID)
	}
	return out
}

func schedules(ctx context.Context, api *client.Client) []string {
	raw, err := api.ListSchedules(ctx)
	var l apiv1.ScheduleList
	if err != nil || json.Unmarshal(raw, &l) != nil {
		return nil
	}
	var out []string
	for _, s := range l.Schedules {
		out = append(out, s.Name)
	}
	return out
}

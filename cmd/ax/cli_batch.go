package main

import (
	"context"

	"github.com/ax-sched/ax/cmd/ax/internal/batchcli"
	"github.com/spf13/cobra"
)

func newBatchCmd() *cobra.Command {
	c := &cobra.Command{Use: "batch", Short: "Batches: tasks submitted together, with callbacks that run once they have all ended"}
	run := func(body func(context.Context, batchcli.Env, []string) error) func(*cobra.Command, []string) error {
		return cliRun(func(ctx context.Context, env *cliEnv, args []string) error {
			return body(ctx, batchcli.Env{API: env.api, JSON: env.json, Stdout: env.stdout, Loc: env.loc, PrintJSON: env.printJSON,
				ReadInput: env.readInput, Usage: cliUsage}, args)
		})
	}
	for _, sub := range batchcli.Commands(run) {
		c.AddCommand(cliCommand(sub))
	}
	return c
}

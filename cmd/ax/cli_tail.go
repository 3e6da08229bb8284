package main

import (
	"context"

	"github.com/ax-sched/ax/cmd/ax/internal/tailcli"
	"github.com/spf13/cobra"
)

func newTailCmd() *cobra.Command {
	return cliCommand(tailcli.Command(func(body func(context.Context, tailcli.Env, []string) error) func(*cobra.Command, []string) error {
		return cliRun(func(ctx context.Context, env *cliEnv, args []string) error {
			return body(ctx, tailcli.Env{API: env.api, JSON: env.json, Stdout: env.stdout, Stderr: env.stderr, Loc: env.loc,
				MaxWait: cliHeaderTimeout / 2, Usage: cliUsage}, args)
		})
	}))
}

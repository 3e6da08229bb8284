package main

import (
	"github.com/ax-sched/ax/cmd/ax/internal/tailcli"
	"github.com/spf13/cobra"
)

func newTailCmd() *cobra.Command { return cliCommand(tailcli.Command()) }

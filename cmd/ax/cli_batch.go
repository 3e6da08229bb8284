package main

import (
	"github.com/ax-sched/ax/cmd/ax/internal/batchcli"
	"github.com/spf13/cobra"
)

func newBatchCmd() *cobra.Command {
	c := &cobra.Command{Use: "batch", Short: "Batches: tasks submitted together, with callbacks that run once they have all ended"}
	for _, sub := range batchcli.Commands() {
		c.AddCommand(cliCommand(sub))
	}
	return c
}

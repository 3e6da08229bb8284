package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/internal/buildinfo"
)

// newVersionCmd prints the build: one line, or JSON with -o json. It needs
// no server, so it does not go through cli.Run.
func newVersionCmd() *cobra.Command {
	return cliCommand(&cobra.Command{
		Use:   "version",
		Short: "Print ax's version, commit, build date and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Get()
			switch out, _ := cmd.Flags().GetString("output"); out {
			case "table", "":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), info.String())
				return err
			case "json":
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			default:
				return usageErr(fmt.Errorf("--output %q: want table or json", out))
			}
		},
	})
}

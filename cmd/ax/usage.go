package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/internal/config/keypath"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ax's exit statuses, the same for every command: a script tells the kind
// of mistake by the number.
const (
	exitFailed = cli.ExitFailed
	exitUsage  = cli.ExitUsage
	exitAuth   = cli.ExitAuth
)

// exitCodesHelp is the table above, for `ax --help`.
const exitCodesHelp = `Exit status: 0 success; 1 the request or the process failed; 2 a usage
mistake (flag, argument, file, environment; nothing was sent or started);
3 the API refused the token (401: give --token or AX_TOKEN) or its role (403).`

// flagError is every command's answer to a flag it cannot parse: a usage
// error, with the closest flag the command has when the name looks
// misspelt ("unknown flag: --typ (did you mean --type?)").
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := closestFlag(cmd, name); s != "" {
			msg += " (did you mean --" + s + "?)"
		}
	}
	return &exitError{code: exitUsage, err: errors.New(msg)}
}

// closestFlag is the name of cmd's flag (its own and inherited) nearest to
// name, if one is near: an edit distance below 3, or name is its prefix.
func closestFlag(cmd *cobra.Command, name string) string {
	best, bestDist := "", 3
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := keypath.Distance(name, f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = min(d, 1)
		}
		if d < bestDist || (d == bestDist && f.Name < best) {
			best, bestDist = f.Name, d
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return best
}

// unifyUsage makes every command below c (c too) answer a bad flag or a
// wrong number of arguments the same way: exit status 2, one line.
func unifyUsage(c *cobra.Command) {
	c.SetFlagErrorFunc(flagError)
	if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("%v (usage: %s)", err, cmd.UseLine())}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		unifyUsage(sub)
	}
}

// cliCommand marks a client command (flag and argument errors are usage
// errors for every command: unifyUsage).
func cliCommand(c *cobra.Command) *cobra.Command { return c }

// Command ax is the scheduler's single binary: `ax server`, `ax worker`,
// `ax dev`, `ax bench`, and the client commands that talk to the HTTP API.
//
// Every flag can also come from the environment (AX_<FLAG>, dashes as
// underscores, e.g. AX_API, AX_OUTPUT) or from a CLI settings file
// (--settings, default $HOME/.config/ax/cli.yaml, keys named like the flags).
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/complete"
	"github.com/ax-sched/ax/internal/bench/command"
	"github.com/ax-sched/ax/internal/config"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is the status the process exits with (cli.Code).
func (e *exitError) ExitCode() int { return e.code }

func main() {
	if err := newRoot().Execute(); err != nil {
		os.Exit(report(os.Stderr, err))
	}
}

// report writes a command's error to w and returns the exit code: no usage
// dump; a config file's problems one per line (each names its file and
// key), any other error on one line.
func report(w io.Writer, err error) int {
	code := cli.Code(err)
	var ce config.Errors
	if errors.As(err, &ce) {
		for _, fe := range ce {
			fmt.Fprintln(w, "ax: "+fe.Error())
		}
		return code
	}
	fmt.Fprintln(w, "ax: "+strings.ReplaceAll(err.Error(), "\n", "; "))
	return code
}

// commands are the constructors of ax's subcommands, the one list of them.
var commands = []func() *cobra.Command{
	// Processes.
	newServerCmd, newWorkerCmd, newDevCmd, command.New, newVersionCmd,
	// Clients of the HTTP API.
	newSubmitCmd, newGetCmd, newTasksCmd, newTrailCmd, newCancelCmd, newPriorityCmd, newTailCmd,
	newExplainCmd, newRegionsCmd, newRegionCmd, newCostCmd, newDLQCmd, newDAGCmd, newScheduleCmd, newBatchCmd,
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "ax",
		Short:         "ax — an adaptive, federated task scheduler",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindViper(cmd)
		},
	}
	pf := root.PersistentFlags()
	pf.String("api", defaultAPI, "ax server API address")
	pf.String("token", "", "bearer token for the API")
	pf.String("ca", "", "PEM CA that signed the API's certificate (https --api; default: the system roots)")
	pf.String("cert", "", "PEM client certificate, for an API that requires one (mutual TLS; with --key)")
	pf.String("key", "", "PEM key of --cert")
	pf.StringP("output", "o", "table", "output format: table or json")
	pf.Bool("local", false, "print times in the local time zone (default UTC); RFC 3339 with the zone either way")
	pf.String("settings", defaultSettings(), "CLI settings file (YAML; keys named like the flags)")
	for _, c := range commands {
		root.AddCommand(c())
	}
	refuseUnknownSubcommands(root)
	complete.Register(root, func(cmd *cobra.Command) (*client.Client, error) {
		_ = bindViper(cmd) // completion runs no hooks: AX_* env and the settings file apply here
		api, _, err := cli.Client(cmd)
		return api, err
	})
	unifyUsage(root)
	root.SetUsageTemplate(root.UsageTemplate() + "\n" + exitCodesHelp + "\n")
	return root
}

// refuseUnknownSubcommands makes every command group (ax dag, ax dlq, ax
// schedule, …: subcommands, no body of its own) refuse an argument it has no
// subcommand for, as a usage error (exit 2, one line). Cobra would print the
// group's help and exit 0, so `ax dag craete -f x.json` looked like success,
// and so did a subcommand's flags without the subcommand (`ax tasks --state
// RUNNING`: the flags were dropped). The root is a group too.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	// The group parses its own arguments (groupRun).
	c.DisableFlagParsing = true
	c.Args = cobra.ArbitraryArgs
	c.RunE = groupRun
}

// groupRun is a command group run without a subcommand it knows: its help
// for no arguments (or -h), else a usage error naming the unknown
// subcommand or the flag that needs one. A subcommand's flags after a
// misspelt subcommand (`ax dag craete -f x.json`) are not the group's: the
// first pass skips unknown flags, so the error names the subcommand.
func groupRun(cmd *cobra.Command, args []string) error {
	fs := cmd.Flags()
	fs.ParseErrorsWhitelist.UnknownFlags = true
	if err := fs.Parse(args); err != nil {
		return cli.Usage("%v (see %s --help)", err, cmd.CommandPath())
	}
	if rest := fs.Args(); len(rest) > 0 {
		hint := ""
		cmd.SuggestionsMinimumDistance = max(cmd.SuggestionsMinimumDistance, 2)
		if s := cmd.SuggestionsFor(rest[0]); len(s) > 0 {
			hint = fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		return cli.Usage("unknown command %q for %q%s (see %s --help)", rest[0], cmd.CommandPath(), hint, cmd.CommandPath())
	}
	if h, _ := fs.GetBool("help"); h {
		return cmd.Help()
	}
	fs.ParseErrorsWhitelist.UnknownFlags = false
	if err := fs.Parse(args); err != nil {
		return cli.Usage("%v: %q needs a subcommand (see %s --help)", err, cmd.CommandPath(), cmd.CommandPath())
	}
	return cmd.Help()
}

func defaultSettings() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config", "ax", "cli.yaml")
}

// settingList reads a list setting: a YAML sequence, or a comma-separated
// string (environment).
func settingList(v any) []string {
	switch x := v.(type) {
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
		return out
	case []string:
		return x
	case string:
		if x == "" {
			return nil
		}
		return strings.Split(x, ",")
	}
	return []string{fmt.Sprint(v)}
}

// bindViper fills every flag the user did not set from AX_* env vars or the
// settings file, so commands read plain flag values.
func bindViper(cmd *cobra.Command) error {
	v := viper.New()
	v.SetEnvPrefix("AX")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	v.AutomaticEnv()
	settings, _ := cmd.Flags().GetString("settings")
	if settings != "" {
		if _, err := os.Stat(settings); err == nil {
			v.SetConfigFile(settings)
			if err := v.ReadInConfig(); err != nil {
				return fmt.Errorf("settings %s: %w", settings, err)
			}
		}
	}
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "settings" {
			return
		}
		if v.IsSet(f.Name) {
			// Lists (settings-file YAML sequences or comma-separated env
			// values) replace a slice flag's value element by element.
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				if e := sv.Replace(settingList(v.Get(f.Name))); e != nil {
					err = fmt.Errorf("%s (from %s or settings): %w", f.Name, flagEnv(f.Name), e)
				}
				return
			}
			val := fmt.Sprint(v.Get(f.Name))
			if m, ok := v.Get(f.Name).(map[string]any); ok { // k=v maps (--tag) from the settings file
				kv := make([]string, 0, len(m))
				for k, x := range m {
					kv = append(kv, k+"="+fmt.Sprint(x))
				}
				sort.Strings(kv)
				val = strings.Join(kv, ",")
			}
			if e := cmd.Flags().Set(f.Name, val); e != nil {
				err = fmt.Errorf("%s (from %s or settings): %w", f.Name, flagEnv(f.Name), e)
			}
		}
	})
	return err
}

// flagEnv is the variable bindViper reads for a flag: AX_TYPE_CONCURRENCY
// for --type-concurrency.
func flagEnv(name string) string {
	return config.EnvPrefix + "_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// loadOptions are the config.Load options of the commands that read a
// region file (ax server, worker, dev): the environment is checked, and the
// AX_ variables ax reads or sets besides the config's keys are no problem —
// every command's flags (the shell that runs ax server may hold AX_API or
// AX_TOKEN for the CLI, a unit file AX_CONCURRENCY for ax worker),
// AX_LOG_FORMAT (newLogger) and those the exec handler gives every command
// it runs (an ax started by one has them).
func loadOptions(root *cobra.Command) config.Option {
	names := []string{"AX_LOG_FORMAT", "AX_TASK_ID", "AX_TASK_TYPE", "AX_ATTEMPT", "AX_TRACE_ID"}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		add := func(f *pflag.Flag) { names = append(names, flagEnv(f.Name)) }
		c.PersistentFlags().VisitAll(add)
		c.Flags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return config.CheckEnv(names...)
}

// warnIgnoredEnv logs, once at start, the AX_ variables that set config
// keys (INFO: where a value came from, names only) and those that nothing
// reads (WARN: a variable of another tool, or a mistake the config could
// not tell).
func warnIgnoredEnv(log *slog.Logger, cfg *config.Region) {
	if v := cfg.OverrideEnv(); len(v) > 0 {
		log.Info("config keys set from the environment", "vars", strings.Join(v, ","))
	}
	if v := cfg.IgnoredEnv(); len(v) > 0 {
		log.Warn("AX_ variables that no config key or ax flag reads: ignored", "vars", strings.Join(v, ","))
	}
}

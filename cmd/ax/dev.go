package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/server"
	"github.com/ax-sched/ax/worker/handlers"
	"github.com/spf13/cobra"
)

func newDevCmd() *cobra.Command {
	var dir string
	var tmp bool
	var apiPort int
	var workers int
	var noDemo, auth bool
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run everything on this machine: embedded etcd, one Redis per region, three regions with leaders, workers and the API",
		Long: `ax dev starts, in one process, an embedded etcd, one Redis per region (real
redis-server child processes when redis-server is on PATH, else an in-process
Redis-compatible server that is for trying ax out only), the three regions of
configs/dev (AWS-, GCP- and Azure-like, example prices), a worker for every
pool with the noop, sleep and demo exec handlers (none with
--no-demo-workers: run your own, see the README), and the API on
127.0.0.1:8080 with auth OFF (--auth, or AX_AUTH_ENABLED=true: on, with an
admin token made for the run and printed). Ports another process holds are
replaced by free ones, and the banner says so. Ctrl-C stops everything.

On a terminal it prints a short banner and logs warnings only
(AX_LOG_FORMAT=text logs everything); otherwise it logs JSON, the banner's
facts included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Its workers run commands: as `ax worker` does
			// (handlers.SealProcess); its configs still read the
			// environment, so nothing is unset.
			if _, err := handlers.SealProcess(); err != nil {
				return err
			}
			// AX_AUTH_ENABLED=true asks for auth as --auth does: the
			// configs have no tokens of their own, so it is not theirs.
			if v, ok := os.LookupEnv("AX_AUTH_ENABLED"); ok {
				on, err := strconv.ParseBool(v)
				if err != nil {
					return usageErr(fmt.Errorf("AX_AUTH_ENABLED=%q: want true or false", v))
				}
				auth = auth || on
				os.Unsetenv("AX_AUTH_ENABLED")
			}
			if tmp {
				d, err := os.MkdirTemp("", "ax-dev-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				dir = d
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			level := slog.LevelInfo
			if server.LogOnTerminal() {
				level = slog.LevelWarn // the banner says what runs
			}
			log := server.NewLogger(level)
			opts := loadOptions(cmd.Root())
			cfgs, err := server.DevConfigs(opts)
			if err != nil {
				return usageErr(err) // the environment's problems: the files are ax's own
			}
			warnIgnoredEnv(log, cfgs[0]) // the same environment for every region
			out, started, human := cmd.OutOrStdout(), false, server.LogIsText()
			err = server.RunDev(ctx, cfgs, server.DevOptions{Dir: dir, Port: apiPort, Slots: workers, Demo: !noDemo,
				AnyPortIfBusy: !cmd.Flags().Changed("port"), Auth: auth,
				Load: []config.Option{opts}, Started: func(d server.Dev) {
					started = true
					if human {
						writeDevBanner(out, d, !noDemo)
					} else {
						logDevStart(log, d)
						if d.Token != "" { // never into a log
							fmt.Fprintln(out, "export AX_TOKEN="+d.Token)
						}
					}
				}}, log)
			if started && human {
				fmt.Fprintln(out, "ax dev stopped.")
			} else if started {
				log.Info("ax dev stopped")
			}
			return err
		},
	}
	c.Flags().StringVar(&dir, "dir", ".ax-dev", "state directory (etcd data, Redis files)")
	c.Flags().BoolVar(&tmp, "tmp", false, "keep state in a temporary directory, removed on exit")
	c.Flags().IntVar(&apiPort, "port", 8080, "API port of the first region; the others take the next ports (0: any free ports, printed at start). Busy default ports are replaced by free ones; a busy --port is an error")
	c.Flags().IntVar(&workers, "worker-slots", 4, "slots of each dev worker (one worker per pool), at most its pool's slots")
	c.Flags().BoolVar(&noDemo, "no-demo-workers", false, "start no worker: pools have no slots until you run your own (README: your own handler)")
	c.Flags().BoolVar(&auth, "auth", false, "turn auth on in every region, with an admin token made for this run (printed at start)")
	return c
}

// writeDevBanner tells what ax dev runs, what it had to move, and what to
// try next: the lines to paste into another shell come first.
func writeDevBanner(w io.Writer, d server.Dev, demo bool) {
	var lines []string
	for _, r := range d.Regions {
		lines = append(lines, fmt.Sprintf("  %-13s API %-22s Redis %-16s pools: %s", r.Name, r.API, r.Redis, strings.Join(r.Pools, ", ")))
	}
	first := d.Regions[0]
	var notes []string
	if d.PortsBusy != "" {
		notes = append(notes, "  ports "+d.PortsBusy+" are taken: the APIs are on free ports (above)")
	}
	for _, r := range d.Regions {
		if r.RedisBusy != "" {
			notes = append(notes, fmt.Sprintf("  %s is taken: %s's Redis is on %s", r.RedisBusy, r.Name, r.Redis))
		}
	}
	auth := "auth OFF"
	exports := "  export AX_API=" + first.API
	if d.Token != "" {
		auth = "auth on, admin token below"
		exports += "\n  export AX_TOKEN=" + d.Token
	}
	if !demo {
		notes = append(notes, "  no workers (--no-demo-workers): run your own, e.g.\n"+
			"  go run ./examples/customhandler --redis "+first.Redis+" --region "+first.Name+" --pool cpu-spot")
	}
	note := ""
	if len(notes) > 0 {
		note = strings.Join(notes, "\n") + "\n"
	}
	fmt.Fprintf(w, `
ax dev is running (state in %s, %s):
  etcd          %s (embedded)
%s
  dashboard     %s/
%s
In another shell (the CLI reads these):
%s

Try next:
%s
Ctrl-C stops everything.
`, d.Dir, auth, d.Etcd, strings.Join(lines, "\n"), first.API, note, exports, devHints(first.API))
}

// logDevStart is the banner's facts as one log line, for a log collector
// (the admin token is printed on stdout, never logged).
func logDevStart(log *slog.Logger, d server.Dev) {
	attrs := []any{"dir", d.Dir, "etcd", d.Etcd, "auth", d.Token != ""}
	if d.PortsBusy != "" {
		attrs = append(attrs, "ports_taken", d.PortsBusy)
	}
	for _, r := range d.Regions {
		g := []any{"api", r.API, "redis", r.Redis, "pools", r.Pools}
		if r.RedisBusy != "" {
			g = append(g, "redis_taken", r.RedisBusy)
		}
		attrs = append(attrs, slog.Group(r.Name, g...))
	}
	log.Info("ax dev is running", attrs...)
}

// defaultAPI is the CLI's --api default: ax dev's first region on its
// default port.
const defaultAPI = "http://127.0.0.1:8080"

// devHints are the commands ax dev suggests, aimed at its first region's
// API: on another port (--port) they name it, or they would reach
// whatever listens on 8080.
func devHints(api string) string {
	flag := ""
	if api != defaultAPI {
		flag = " --api " + api
	}
	var b strings.Builder
	for _, c := range []string{"submit --type noop --tag class=spot", "regions", "explain --type sleep --tag gpu=a100"} {
		b.WriteString("  go run ./cmd/ax" + flag + " " + c + "\n")
	}
	return b.String()
}

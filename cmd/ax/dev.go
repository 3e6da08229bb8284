package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
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
	var noDemo bool
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run everything on this machine: embedded etcd, one Redis per region, three regions with leaders, workers and the API",
		Long: `ax dev starts, in one process, an embedded etcd, one Redis per region (real
redis-server child processes when redis-server is on PATH, else an in-process
Redis-compatible server that is for trying ax out only), the three regions of
configs/dev (AWS-, GCP- and Azure-like, example prices), a worker for every
pool with the noop, sleep and demo exec handlers (none with
--no-demo-workers: run your own, see the README), and the API on
127.0.0.1:8080 with auth OFF. Ctrl-C stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Its workers run commands: as `ax worker` does
			// (handlers.SealProcess); its configs still read the
			// environment, so nothing is unset.
			if _, err := handlers.SealProcess(); err != nil {
				return err
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
			log := server.NewLogger(slog.LevelInfo)
			opts := loadOptions(cmd.Root())
			cfgs, err := server.DevConfigs(opts)
			if err != nil {
				return usageErr(err) // the environment's problems: the files are ax's own
			}
			warnIgnoredEnv(log, cfgs[0]) // the same environment for every region
			out, started := cmd.OutOrStdout(), false
			err = server.RunDev(ctx, cfgs, server.DevOptions{Dir: dir, Port: apiPort, Slots: workers, Demo: !noDemo,
				Load: []config.Option{opts}, Started: func(d server.Dev) {
					started = true
					writeDevBanner(out, d, !noDemo)
				}}, log)
			if started {
				fmt.Fprintln(out, "ax dev stopped.")
			}
			return err
		},
	}
	c.Flags().StringVar(&dir, "dir", ".ax-dev", "state directory (etcd data, Redis files)")
	c.Flags().BoolVar(&tmp, "tmp", false, "keep state in a temporary directory, removed on exit")
	c.Flags().IntVar(&apiPort, "port", 8080, "API port of the first region; the others take the next ports (0: any free ports, printed at start)")
	c.Flags().IntVar(&workers, "worker-slots", 4, "slots of each dev worker (one worker per pool), at most its pool's slots")
	c.Flags().BoolVar(&noDemo, "no-demo-workers", false, "start no worker: pools have no slots until you run your own (README: your own handler)")
	return c
}

// writeDevBanner tells what ax dev runs and what to try next.
func writeDevBanner(w io.Writer, d server.Dev, demo bool) {
	var lines []string
	for _, r := range d.Regions {
		lines = append(lines, fmt.Sprintf("  %-13s API %-22s Redis %-16s pools: %s", r.Name, r.API, r.Redis, strings.Join(r.Pools, ", ")))
	}
	first := d.Regions[0]
	if !demo {
		lines = append(lines, "  no workers (--no-demo-workers): run your own, e.g.\n"+
			"  go run ./examples/customhandler --redis "+first.Redis+" --region "+first.Name+" --pool cpu-spot")
	}
	fmt.Fprintf(w, `
ax dev is running (state in %s):
  etcd          %s (embedded)
%s
  dashboard     %s/

Try next:
%s
Ctrl-C stops everything.
`, d.Dir, d.Etcd, strings.Join(lines, "\n"), first.API, devHints(first.API))
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

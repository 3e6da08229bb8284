package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/server"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
	"github.com/spf13/cobra"
)

func newWorkerCmd() *cobra.Command {
	var file, pool, id, metricsAddr string
	var concurrency int
	var typeConcurrency map[string]int
	c := &cobra.Command{
		Use:   "worker --config FILE --pool P",
		Short: "Run a worker for one pool of a region, with the built-in handlers (noop, sleep, exec, http)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before anything reads a secret: the commands it runs must
			// not find them in /proc (handlers.SealProcess).
			forget, err := handlers.SealProcess()
			if err != nil {
				return err
			}
			// A worker never calls another server: it does not take the
			// cluster token (nor the API tokens), so that nothing it runs
			// can find them in its memory or environment. It keeps the API
			// tokens' SHA-256 only: its --metrics checks them as a server's
			// /metrics does.
			_ = os.Unsetenv(config.EnvPrefix + "_AUTH_CLUSTER_TOKEN")
			cfg, err := config.Load(file, loadOptions(cmd.Root()))
			forget()
			if err != nil {
				return usageErr(err)
			}
			tokens := make([]config.Token, len(cfg.Auth.Tokens))
			for i, t := range cfg.Auth.Tokens {
				tokens[i] = config.Token{Name: t.Name, TokenSHA256: t.TokenSHA256, Role: t.Role, Tenant: t.Tenant, ExpiresAt: t.ExpiresAt}
			}
			cfg.Auth = config.Auth{Enabled: cfg.Auth.Enabled, Tokens: tokens, FailuresPerMinute: cfg.Auth.FailuresPerMinute}
			p, ok := cfg.Pool(pool)
			if !ok {
				return usageErr(fmt.Errorf("%s: pools: no pool %q (have %s)", file, pool, server.PoolNames(cfg)))
			}
			if concurrency > 0 {
				cfg.Worker.Concurrency = concurrency
			}
			if len(typeConcurrency) > 0 {
				cfg.Worker.Types = map[string]config.WorkerType{}
				own := 0
				for t, n := range typeConcurrency {
					if err := task.CheckType(t); err != nil || n < 1 {
						return usageErr(fmt.Errorf("--type-concurrency %s=%d: want a task type and slots ≥ 1", t, n))
					}
					cfg.Worker.Types[t] = config.WorkerType{Concurrency: n}
					own += n
				}
				if own >= cfg.Worker.Concurrency {
					return usageErr(fmt.Errorf("--type-concurrency: %d slots leave none of the worker's %d for the other types", own, cfg.Worker.Concurrency))
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			log := server.NewLogger(slog.LevelInfo)
			warnIgnoredEnv(log, cfg)
			// SIGHUP (sent to every ax process to reload the servers, or
			// a closed terminal) ended the worker at once, its running
			// tasks left to expire and spend a retry each. It has nothing
			// to reload: it says so and keeps running.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						log.Warn("SIGHUP: ax worker reloads nothing (restart it to apply a new config); still running", "pool", p.Name)
					}
				}
			}()
			var m *worker.Metrics
			if metricsAddr != "" {
				reg := server.NewRegistry()
				m = server.WorkerMetrics(cfg, reg)
				srv, err := server.ServeMetrics(metricsAddr, reg, cfg, log)
				if err != nil {
					return err
				}
				defer srv.Close()
			}
			return server.RunWorker(ctx, cfg, p, id, m, log)
		},
	}
	c.Flags().StringVar(&file, "config", "", "region config file (YAML)")
	c.Flags().StringVar(&pool, "pool", "", "pool to serve")
	c.Flags().StringVar(&id, "id", "", "worker id (default host-pid)")
	c.Flags().IntVar(&concurrency, "concurrency", 0, "slots (default worker.concurrency from the config)")
	c.Flags().StringToIntVar(&typeConcurrency, "type-concurrency", nil,
		"task types' own slots, taken out of --concurrency, e.g. sleep=4,http=2 (default worker.types from the config)")
	c.Flags().StringVar(&metricsAddr, "metrics", "", "serve the worker's Prometheus metrics (schedule latency, wait, outcomes, cost) on this address, e.g. :9101")
	_ = c.MarkFlagRequired("config")
	_ = c.MarkFlagRequired("pool")
	return c
}

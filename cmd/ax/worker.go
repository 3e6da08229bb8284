package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ax-sched/ax/internal/buildinfo"
	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/queue"
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
			// can find them in its memory or environment.
			_ = os.Unsetenv(config.EnvPrefix + "_AUTH_CLUSTER_TOKEN")
			cfg, err := config.Load(file, loadOptions(cmd.Root()))
			forget()
			if err != nil {
				return usageErr(err)
			}
			cfg.Auth = config.Auth{}
			p, ok := cfg.Pool(pool)
			if !ok {
				return usageErr(fmt.Errorf("%s: pools: no pool %q (have %s)", file, pool, poolNames(cfg)))
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
			log := newLogger(slog.LevelInfo)
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
				reg := newRegistry()
				m = workerMetrics(cfg, reg)
				srv, err := serveMetrics(metricsAddr, reg, log)
				if err != nil {
					return err
				}
				defer srv.Close()
			}
			return runWorker(ctx, cfg, p, id, m, log)
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

// runWorker serves one pool until ctx ends, then shuts down gracefully. m
// (may be nil) receives its figures.
func runWorker(ctx context.Context, cfg *config.Region, p config.Pool, id string, m *worker.Metrics, log *slog.Logger) error {
	rdb, err := redisClient(cfg.Redis, 0)
	if err != nil {
		return err
	}
	defer rdb.Close()
	store, err := queue.New(rdb, storeOptions(cfg))
	if err != nil {
		return err
	}
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), p.Name)
	}
	tp, stopTracing, err := startTracing(cfg, "ax-worker", id)
	if err != nil {
		return err
	}
	defer stopTracing()
	w, err := worker.New(store, worker.Options{
		Pool: p.Name, ID: id, Concurrency: cfg.Worker.Concurrency, TypeConcurrency: cfg.Worker.TypeConcurrency(), ClaimBatch: cfg.Worker.ClaimBatch,
		Heartbeat: cfg.Lease.Heartbeat, ShutdownGrace: cfg.Worker.ShutdownGrace,
		PreemptDelayMin: cfg.Preemption.ReadmitDelayMin, PreemptDelayMax: cfg.Preemption.ReadmitDelayMax,
		PricePerSlotHour: p.PricePerSlotHour * (1 - p.Discount),
		Logger:           log.With("region", cfg.Name), // the worker adds pool and worker
		Metrics:          m,
		TracerProvider:   tp,
	})
	if err != nil {
		return err
	}
	if err := registerBuiltins(w, cfg); err != nil {
		return err
	}
	log.Info("ax worker started", "region", cfg.Name, "pool", p.Name, "id", id, "slots", cfg.Worker.Concurrency,
		"version", buildinfo.Get().Version, "commit", buildinfo.Get().Commit)
	err = w.Run(ctx)
	log.Info("ax worker stopped", "pool", p.Name, "id", id)
	return err
}

// registerBuiltins adds noop, sleep, exec (the config's allowlist) and http
// (the config's URL prefixes).
func registerBuiltins(w *worker.Worker, cfg *config.Region) error {
	w.Handle("noop", handlers.Noop)
	w.Handle("sleep", handlers.Sleep)
	if len(cfg.Worker.Exec.Allow) > 0 {
		rules := map[string]handlers.ExecRule{}
		for name, r := range cfg.Worker.Exec.Allow {
			h := r.Handler()
			h.RunAs = cfg.Worker.Exec.RunAs
			rules[name] = h
		}
		h, err := handlers.Exec(rules)
		if err != nil {
			return fmt.Errorf("worker.exec.allow: %w", err)
		}
		w.Handle("exec", h)
	}
	return registerHTTP(w, cfg)
}

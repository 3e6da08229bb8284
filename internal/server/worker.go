package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ax-sched/ax/internal/buildinfo"
	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/region/identity"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
)

// RunWorker serves one pool until ctx ends, then shuts down gracefully. m
// (may be nil) receives its figures.
func RunWorker(ctx context.Context, cfg *config.Region, p config.Pool, id string, m *worker.Metrics, log *slog.Logger) error {
	// A worker knows no federation: it holds to the Redis identity it
	// first finds, and to its region's.
	guard := identity.NewGuard(redisNode(cfg.Redis), redisIdentity(cfg, ""), false, log.With("region", cfg.Name))
	rdb, err := redisClient(cfg.Redis, 0, guard)
	if err != nil {
		return err
	}
	defer rdb.Close()
	store, err := store.New(rdb, storeOptions(cfg))
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
	if cfg.Tracing.Redis {
		tracing.Hooks(rdb, tp, redisNode(cfg.Redis))
	}
	w, err := worker.New(store.Claimer(), worker.Options{
		Pool: p.Name, ID: id, Concurrency: cfg.Worker.Concurrency, TypeConcurrency: cfg.Worker.TypeConcurrency(), ClaimBatch: cfg.Worker.ClaimBatch,
		Heartbeat: cfg.Lease.Heartbeat, ShutdownGrace: cfg.Worker.ShutdownGrace,
		PreemptDelayMin: cfg.Preemption.ReadmitDelayMin, PreemptDelayMax: cfg.Preemption.ReadmitDelayMax,
		PricePerSlotHour: p.PricePerSlotHour * (1 - p.Discount),
		MaxResultBytes:   cfg.Results.MaxBytes,
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
	// The worker retries Redis for ever; a first ping says whether it is
	// serving or still waiting, and which key to fix when it waits.
	msg := "ax worker started"
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := store.Ping(pctx); err != nil {
		msg = "ax worker has not connected to Redis yet; retrying"
		key, from := redisOrigin(cfg)
		log.Warn(msg, "err", err, key, redisNode(cfg.Redis), "from", from)
	}
	cancel()
	log.Info(msg, "region", cfg.Name, "pool", p.Name, "id", id, "slots", cfg.Worker.Concurrency,
		"version", buildinfo.Get().Version, "commit", buildinfo.Get().Commit)
	err = w.Run(ctx)
	log.Info("ax worker stopped", "pool", p.Name, "id", id)
	return err
}

// registerBuiltins adds noop, sleep, exec (the config's allowlist) and http
// (the config's URL prefixes).
func registerBuiltins(w *worker.Worker, cfg *config.Region) error {
	registerBasic(w)
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

// registerBasic adds noop and sleep, which need no configuration.
func registerBasic(w *worker.Worker) {
	w.Handle("noop", handlers.Noop)
	w.Handle("sleep", handlers.Sleep)
}

package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/ax-sched/ax/internal/buildinfo"
	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/remote"
)

// RemoteWorker is what `ax worker --api` runs: the built-in handlers for
// one pool, served through the API's worker protocol with a worker token.
type RemoteWorker struct {
	URLs        []string
	Token       string
	Pool        string
	ID          string // default host-pid-pool
	Concurrency int    // default the config's worker.concurrency, else the CPUs
	// Config, when set, configures the handlers (worker.exec, worker.http)
	// and the shutdown grace; its Redis and auth sections are not used.
	Config  *config.Region
	Metrics *worker.Metrics
}

// RunRemoteWorker serves rw.Pool until ctx ends, then shuts down
// gracefully: running handlers finish (or are stopped after the grace),
// their outcomes are reported, and the worker leaves.
func RunRemoteWorker(ctx context.Context, rw RemoteWorker, log *slog.Logger) error {
	src, err := worker.Remote(rw.URLs, rw.Token, remote.Options{Logger: log})
	if err != nil {
		return err
	}
	id := rw.ID
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rw.Pool)
	}
	opts := worker.Options{Pool: rw.Pool, ID: id, Concurrency: rw.Concurrency, Logger: log, Metrics: rw.Metrics}
	cfg := rw.Config
	if cfg != nil {
		opts.ClaimBatch, opts.ShutdownGrace = cfg.Worker.ClaimBatch, cfg.Worker.ShutdownGrace
		if opts.Concurrency == 0 {
			opts.Concurrency = cfg.Worker.Concurrency
		}
	}
	w, err := worker.New(src, opts)
	if err != nil {
		return err
	}
	if cfg != nil {
		if err := registerBuiltins(w, cfg); err != nil {
			return err
		}
	} else {
		registerBasic(w)
	}
	log.Info("ax worker started (remote)", "api", rw.URLs, "pool", rw.Pool, "id", id, "slots", w.Options().Concurrency,
		"handles", w.Types().String(), "version", buildinfo.Get().Version, "commit", buildinfo.Get().Commit)
	err = w.Run(ctx)
	log.Info("ax worker stopped", "pool", rw.Pool, "id", id)
	return err
}

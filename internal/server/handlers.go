package server

import (
	"fmt"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
)

// registerHTTP adds the http handler when the config allows URL prefixes.
func registerHTTP(w *worker.Worker, cfg *config.Region) error {
	if len(cfg.Worker.HTTP.AllowPrefixes) == 0 {
		return nil
	}
	h, err := handlers.HTTP(handlers.HTTPOptions{Allow: cfg.Worker.HTTP.AllowPrefixes, DenyPrivate: cfg.Worker.HTTP.DenyPrivate})
	if err != nil {
		return fmt.Errorf("worker.http: %w", err)
	}
	w.Handle("http", h)
	return nil
}

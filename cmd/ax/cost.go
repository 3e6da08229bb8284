package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Cost accounting of a worker process: cost = price at claim × run time ×
// slots (one slot per task). Exposed on the worker's --metrics address.
var (
	workerRegistry = prometheus.NewRegistry()
	costDollars    = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_cost_dollars_total",
		Help: "Cost of finished attempts: price per slot-hour at claim × run time.",
	}, []string{"region", "pool", "tenant", "type"})
	runSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_task_run_seconds_total",
		Help: "Handler run time of finished attempts.",
	}, []string{"region", "pool", "tenant", "type"})
	savingsDollars = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_savings_dollars_total",
		Help: "Savings of finished attempts against the most expensive eligible on-demand pool of the region: (that price − price at claim) × run time.",
	}, []string{"region", "pool", "tenant", "type"})
	finished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_tasks_finished_total",
		Help: "Attempts finished by this worker, by the state the task moved to.",
	}, []string{"region", "pool", "state"})
)

func init() { workerRegistry.MustRegister(costDollars, savingsDollars, runSeconds, finished) }

// serveMetrics exposes the worker's registry on addr (/metrics).
func serveMetrics(addr string, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(workerRegistry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Warn("metrics server", "err", err)
		}
	}()
	return srv, nil
}

// costObserver is where completed work turns into cost figures: cost =
// price at claim × run time (one slot per task); savings against the most
// expensive on-demand pool of the region that carries the task's tags.
func costObserver(cfg *config.Region, pool string) func(*worker.Task, task.State, time.Duration) {
	return func(t *worker.Task, st task.State, d time.Duration) {
		observeCost(cfg.Name, pool, t, st, d)
		if st == "" {
			return
		}
		if ref := referencePrice(cfg, t.Tags); ref > t.Price {
			savingsDollars.WithLabelValues(cfg.Name, pool, t.Tenant, t.Type).Add((ref - t.Price) * d.Hours())
		}
	}
}

// referencePrice is the highest effective price of an on-demand pool whose
// tags include every tag of the task (0 when none).
func referencePrice(cfg *config.Region, tags map[string]string) float64 {
	best := 0.0
	for _, p := range cfg.Pools {
		if p.Spot {
			continue
		}
		ok := true
		for k, v := range tags {
			if p.Tags[k] != v {
				ok = false
				break
			}
		}
		if price := p.PricePerSlotHour * (1 - p.Discount); ok && price > best {
			best = price
		}
	}
	return best
}

func observeCost(regionName, pool string, t *worker.Task, st task.State, d time.Duration) {
	if st == "" {
		return // the lease was lost: another worker owns the outcome
	}
	finished.WithLabelValues(regionName, pool, string(st)).Inc()
	l := []string{regionName, pool, t.Tenant, t.Type}
	runSeconds.WithLabelValues(l...).Add(d.Seconds())
	costDollars.WithLabelValues(l...).Add(t.Price * d.Hours())
}

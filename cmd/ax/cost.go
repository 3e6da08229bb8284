package main

import (
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/worker"
	"github.com/prometheus/client_golang/prometheus"
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
	finished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_tasks_finished_total",
		Help: "Attempts finished by this worker, by the state the task moved to.",
	}, []string{"region", "pool", "state"})
)

func init() { workerRegistry.MustRegister(costDollars, runSeconds, finished) }

func observeCost(regionName, pool string, t *worker.Task, st queue.State, d time.Duration) {
	if st == "" {
		return // the lease was lost: another worker owns the outcome
	}
	finished.WithLabelValues(regionName, pool, string(st)).Inc()
	l := []string{regionName, pool, t.Tenant, t.Type}
	runSeconds.WithLabelValues(l...).Add(d.Seconds())
	costDollars.WithLabelValues(l...).Add(t.Price * d.Hours())
}

package worker

import (
	"strconv"
	"time"

	"github.com/ax-sched/ax/internal/labelcap"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
)

// Default caps of the tenant and type label values (MetricsOptions).
const (
	DefaultMaxTenantLabels = 50
	DefaultMaxTypeLabels   = 50
)

// LatencyBuckets are the buckets (seconds) of the schedule-latency and
// wait histograms: fine below the design's 2 s alert, coarse up to an hour
// of backlog.
var LatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// MetricsOptions configure NewMetrics.
type MetricsOptions struct {
	// Region labels every series (required: the workers' region).
	Region string
	// MaxTenants and MaxTypes cap the distinct tenant and type label values
	// of the cost and run-time counters: the first ones seen keep their
	// name, later ones are counted as "_other" (default 50 each; negative:
	// none, every value is "_other"). MaxTypes is each tenant's own: one
	// tenant's types never push another's into "_other". They bound the
	// series a submitter can create: (MaxTenants+1) × (MaxTypes+1) per pool
	// and counter.
	MaxTenants, MaxTypes int
	// ReferencePrice, when set, is the price per slot-hour a task would
	// have cost on the cheapest on-demand pool it could have run on; savings count
	// (reference − price at claim) × run time when positive.
	ReferencePrice func(tags map[string]string) float64
}

// Metrics are the figures of a region's workers in one process, exported
// with the labels region and pool (and priority, or tenant and type, where
// noted). Every worker of the region shares one Metrics, as they share one
// registry: set Options.Metrics.
type Metrics struct {
	region    string
	types     *labelcap.Scoped // tenant → its types
	reference func(map[string]string) float64

	latency, wait               *prometheus.HistogramVec
	inflight                    *prometheus.GaugeVec
	finished, retries, timeouts *prometheus.CounterVec
	run, cost, savings          *prometheus.CounterVec
}

// NewMetrics registers the workers' metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer, o MetricsOptions) *Metrics {
	limit := func(n, def int) int {
		switch {
		case n == 0:
			return def
		case n < 0:
			return 0
		}
		return n
	}
	h := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: LatencyBuckets},
			[]string{"region", "pool", "priority"})
	}
	c := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"region", "pool"}, labels...))
	}
	m := &Metrics{
		region:    o.Region,
		types:     labelcap.NewScoped(limit(o.MaxTenants, DefaultMaxTenantLabels), limit(o.MaxTypes, DefaultMaxTypeLabels)),
		reference: o.ReferencePrice,
		latency: h("ax_task_schedule_latency_seconds",
			"Scheduling latency of claimed tasks: from becoming READY (or due) to the claim that started the attempt, by the Redis clock."),
		wait: h("ax_task_wait_seconds",
			"Wait of first attempts: from submission (at the home region) to the claim that started them."),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_worker_tasks_inflight",
			Help: "Tasks claimed by this process's workers and not yet settled (running or being recorded)."}, []string{"region", "pool"}),
		finished: c("ax_tasks_finished_total", "Attempts finished by this worker, by the state the task moved to.", "state"),
		retries:  c("ax_task_retries_total", "Failed attempts that the store scheduled for a retry."),
		timeouts: c("ax_task_timeouts_total", "Attempts that ran past their deadline (recorded DEADLINE_EXCEEDED)."),
		run:      c("ax_task_run_seconds_total", "Handler run time of finished attempts.", "tenant", "type"),
		cost:     c("ax_cost_dollars_total", "Cost of finished attempts: price per slot-hour at claim × run time.", "tenant", "type"),
		savings: c("ax_savings_dollars_total",
			"Savings of finished attempts against the cheapest eligible on-demand pool of the region: (that price − price at claim) × run time.", "tenant", "type"),
	}
	if reg != nil {
		reg.MustRegister(m.latency, m.wait, m.inflight, m.finished, m.retries, m.timeouts, m.run, m.cost, m.savings)
	}
	return m
}

// pool makes a pool's bounded series exist at zero, so rates and alerts see
// them before the first event.
func (m *Metrics) pool(pool string) {
	m.inflight.WithLabelValues(m.region, pool)
	m.retries.WithLabelValues(m.region, pool)
	m.timeouts.WithLabelValues(m.region, pool)
	for _, st := range []task.State{task.Success, task.Pending, task.Ready, task.Failed, task.Canceled} {
		m.finished.WithLabelValues(m.region, pool, string(st))
	}
}

// claimed observes a claimed task; started is false for one given back
// unstarted (claimed during shutdown), which no latency counts.
func (m *Metrics) claimed(pool string, qt *task.Task, started bool) {
	m.inflight.WithLabelValues(m.region, pool).Inc()
	if !started || qt.StartedAt == nil {
		return
	}
	prio := strconv.Itoa(qt.Priority)
	if qt.ReadyAt != nil {
		m.latency.WithLabelValues(m.region, pool, prio).Observe(seconds(qt.StartedAt.Sub(*qt.ReadyAt)))
	}
	if qt.Attempts == 1 && !qt.CreatedAt.IsZero() {
		m.wait.WithLabelValues(m.region, pool, prio).Observe(seconds(qt.StartedAt.Sub(qt.CreatedAt)))
	}
}

// failed observes a recorded failure: the state the store moved the task to.
func (m *Metrics) failed(pool string, st task.State, reason string) {
	if st == task.Pending || st == task.Ready {
		m.retries.WithLabelValues(m.region, pool).Inc()
	}
	if reason == task.ReasonDeadline {
		m.timeouts.WithLabelValues(m.region, pool).Inc()
	}
}

// finish observes a settled task; st "" is a lost lease (another
// worker's outcome: no cost counted here).
func (m *Metrics) finish(pool string, t *Task, st task.State, d time.Duration) {
	// Last, so a reader who sees nothing in flight sees every count.
	defer m.inflight.WithLabelValues(m.region, pool).Dec()
	if st == "" {
		return
	}
	m.finished.WithLabelValues(m.region, pool, string(st)).Inc()
	tenant, typ := m.types.Values(t.Tenant, t.Type)
	l := []string{m.region, pool, tenant, typ}
	m.run.WithLabelValues(l...).Add(d.Seconds())
	m.cost.WithLabelValues(l...).Add(t.Price * d.Hours())
	if m.reference != nil {
		if ref := m.reference(t.Tags); ref > t.Price {
			m.savings.WithLabelValues(l...).Add((ref - t.Price) * d.Hours())
		}
	}
}

// seconds is d in seconds, never negative: the two ends of a latency can
// come from different clocks (a hand-off's created_at is the home's).
func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

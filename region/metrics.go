package region

import (
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of a cell (ax_ prefix; labels region, pool).
type Metrics struct {
	leader                            *prometheus.GaugeVec
	leaderChanges, fenced             *prometheus.CounterVec
	promoted, placed, reaped          *prometheus.CounterVec
	slots, running, ready, fill, util *prometheus.GaugeVec
	pressure                          *prometheus.GaugeVec
	starving, dead, pending, held     *prometheus.GaugeVec
	tenantStarving                    *prometheus.GaugeVec
	deferred                          *prometheus.CounterVec
	preemptions                       *prometheus.CounterVec
	limited                           *prometheus.CounterVec
	parked                            *prometheus.GaugeVec
	laneSlots, laneRunning            *prometheus.GaugeVec
	sweepLag                          *prometheus.GaugeVec
	fairStale                         *prometheus.CounterVec
}

// NewMetrics registers the cell's metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	g := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	c := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		leader:        g("ax_region_leader", "1 while this server leads its region's cell.", "region"),
		leaderChanges: c("ax_leader_changes_total", "Terms this server started as its cell's leader.", "region"),
		fenced:        c("ax_fenced_writes_rejected_total", "Leader-only writes rejected by the fence (a newer leader exists).", "region"),
		promoted:      c("ax_tasks_promoted_total", "Delayed tasks that became due.", "region"),
		placed:        c("ax_tasks_placed_total", "Due tasks placed in a pool by the leader.", "region"),
		reaped:        c("ax_leases_reaped_total", "Expired leases moved through TIMEOUT.", "region"),
		slots:         g("ax_pool_slots", "Live slots of a pool (sum over live workers).", "region", "pool"),
		running:       g("ax_pool_running", "RUNNING tasks of a pool.", "region", "pool"),
		ready:         g("ax_pool_ready", "READY tasks of a pool.", "region", "pool"),
		fill:          g("ax_pool_queue_fill", "READY ÷ queue capacity.", "region", "pool"),
		util:          g("ax_pool_utilisation", "RUNNING ÷ live slots.", "region", "pool"),
		pressure:      g("ax_pool_pressure", "Backpressure level: 0 none, 1 alert (≥ alert, low priorities deferred), 2 spill (≥ spill), 3 paused (≥ pause until < resume).", "region", "pool"),
		starving: g("ax_tasks_starving", "Tasks waiting longer than starvation_threshold: READY by pool and nominal priority, "+
			"and due tasks waiting for placement (pool and priority empty).", "region", "pool", "priority"),
		tenantStarving: g("ax_tenant_tasks_starving", "READY tasks of priorities 1–4 waiting longer than starvation_threshold, "+
			"by pool and tenant (docs/fairness.md; in a pool without a fair share from its oldest 256 starving tasks per shard, scaled past that).", "region", "pool", "tenant"),
		dead:    g("ax_dlq_tasks", "Tasks in the dead-letter queue (FAILED, kept for retention.dead).", "region"),
		pending: g("ax_tasks_pending", "PENDING tasks: delayed, waiting for a retry, or due and waiting for placement.", "region"),
		held: g("ax_handoffs_held", "Hand-offs received and held unrun until their sending region's word (counted in ax_tasks_pending); "+
			"a steady number means a sender is unreachable.", "region"),
		deferred:    c("ax_backpressure_deferrals_total", "Due tasks of priorities 3–4 put back by backpressure, or preempted tasks held by the re-admission limit.", "region"),
		preemptions: c("ax_preemptions_total", "Preemption decisions by reason: PREEMPTED or PREEMPT_DENIED_*.", "region", "pool", "reason"),
		limited: c("ax_limited_total", "READY tasks a limit set aside (parked), once per parking, by kind: rate, concurrency, "+
			"paused (a handler's retry after) or slow (a full slow lane); counted by the store since it began.", "region", "pool", "kind"),
		parked: g("ax_pool_parked", "READY tasks set aside by a limit now (counted in ax_pool_ready too).", "region", "pool"),
		laneSlots: g("ax_slow_lane_slots", "Slots a pool's slow lane lets its slow tasks hold: floor(max_share × the pool's slots), at least 1 (docs/fairness.md).",
			"region", "pool"),
		laneRunning: g("ax_slow_lane_running", "RUNNING tasks of a pool's slow types, held to ax_slow_lane_slots.", "region", "pool"),
		sweepLag: g("ax_success_sweep_lag_seconds", "How long the oldest finished (SUCCESS) tasks not yet deleted have been past retention.success "+
			"(the leader's sweep; 0 when it keeps up).", "region"),
		fairStale: c("ax_fair_stale_claims_total", "Fair-share claims that met tenant-set entries no longer READY in a pool whose sets were exact "+
			"(a server of an older ax removing lazily during an upgrade, or a defect); the pool is checked head by head from then on (docs/fairness.md).", "region"),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.leader, m.leaderChanges, m.fenced,
			m.promoted, m.placed, m.reaped, m.slots, m.running, m.ready, m.fill, m.util,
			m.pressure, m.starving, m.tenantStarving, m.dead, m.pending, m.held, m.deferred, m.preemptions, m.limited, m.parked, m.laneSlots, m.laneRunning, m.sweepLag, m.fairStale} {
			reg.MustRegister(col)
		}
	}
	return m
}

// init makes the counters of what this server does exist at zero, so
// rates and alerts see them before the first event.
func (m *Metrics) init(region string, pools []Pool) {
	for _, c := range []*prometheus.CounterVec{m.leaderChanges, m.fenced, m.promoted, m.placed, m.reaped, m.deferred} {
		c.WithLabelValues(region)
	}
	m.leader.WithLabelValues(region)
	m.sweepLag.WithLabelValues(region)
	for _, p := range pools {
		m.preemptions.WithLabelValues(region, p.Name, Preempted)
	}
}

// lead makes the counters the leader reads from the store (ax_limited_total,
// ax_fair_stale_claims_total) exist at zero when a term starts: a standby
// does not export them, as it does not export the gauges (forget).
func (m *Metrics) lead(region string, pools []Pool) {
	m.fairStale.WithLabelValues(region)
	for _, p := range pools {
		for _, k := range []string{"rate", "concurrency", "paused", "slow"} {
			m.limited.WithLabelValues(region, p.Name, k)
		}
	}
}

// forget drops the figures only the leader keeps up to date (pool gauges,
// queue figures, the store's counters) when a term ends, so a standby never
// exports a stale copy next to the new leader's.
func (m *Metrics) forget(region string) {
	l := prometheus.Labels{"region": region}
	for _, g := range []*prometheus.GaugeVec{m.slots, m.running, m.ready, m.fill, m.util, m.pressure,
		m.starving, m.tenantStarving, m.dead, m.pending, m.held, m.parked, m.laneSlots, m.laneRunning, m.sweepLag} {
		g.DeletePartialMatch(l)
	}
	m.limited.DeletePartialMatch(l)
	m.fairStale.DeletePartialMatch(l)
}

// FencedRejections reads the fenced-write counter of a region (tests, status).
func (m *Metrics) FencedRejections(region string) float64 {
	return counterValue(m.fenced.WithLabelValues(region))
}

// Preemptions reads the preemption decisions of a pool with a reason.
func (m *Metrics) Preemptions(region, pool, reason string) float64 {
	return counterValue(m.preemptions.WithLabelValues(region, pool, reason))
}

// LeaderChanges reads the terms counter of a region.
func (m *Metrics) LeaderChanges(region string) float64 {
	return counterValue(m.leaderChanges.WithLabelValues(region))
}

// exported is what the leader remembers between terms about what it
// exported and logged: the store's counters as last read (the store counts
// since it began, the metrics count from the first look), the pools whose
// live workers offered more slots than configured, and the drain rates.
// Only the publisher of the current term uses it.
type exported struct {
	region        string
	metrics       *Metrics
	drain         *drainRates
	waits         *waitWindow
	limitedSeen   map[string]int // "pool kind" → the store's count last exported
	fairStaleSeen int
	overSlots     map[string]int // pool → its live workers' slots last warned about
}

// restart makes the next term's first look export all the store counted
// (its counters start again from zero: forget dropped them).
func (e *exported) restart() {
	e.limitedSeen = map[string]int{}
	e.fairStaleSeen = 0
	e.waits.after = nil // the claims from the term's start on
}

func newExported(region string, m *Metrics) *exported {
	return &exported{region: region, metrics: m, drain: newDrainRates(), waits: &waitWindow{},
		limitedSeen: map[string]int{}, overSlots: map[string]int{}}
}

// observe exports the region's figures.
func (e *exported) observe(f Figures, q queueFigures, ps *pressures) {
	r, m := e.region, e.metrics
	m.dead.WithLabelValues(r).Set(float64(q.dead))
	m.pending.WithLabelValues(r).Set(float64(q.pending))
	m.held.WithLabelValues(r).Set(float64(q.held))
	if d := q.fairStale - e.fairStaleSeen; d > 0 {
		m.fairStale.WithLabelValues(r).Add(float64(d))
	}
	e.fairStaleSeen = q.fairStale
	m.starving.WithLabelValues(r, "", "").Set(float64(q.starving.Unplaced))
	for pool, byPrio := range q.starving.Ready {
		for prio, n := range byPrio {
			m.starving.WithLabelValues(r, pool, strconv.Itoa(prio)).Set(float64(n))
		}
	}
	// Tenants come and go from the index: only those with work now.
	m.tenantStarving.DeletePartialMatch(prometheus.Labels{"region": r})
	for pool, byTenant := range q.starving.Tenants {
		for tn, n := range byTenant {
			m.tenantStarving.WithLabelValues(r, pool, tn).Set(float64(n))
		}
	}
	for _, p := range f.Pools {
		l := []string{r, p.Name}
		m.pressure.WithLabelValues(l...).Set(float64(ps.level(p.Name)))
		m.slots.WithLabelValues(l...).Set(float64(p.Slots))
		m.running.WithLabelValues(l...).Set(float64(p.Running))
		m.ready.WithLabelValues(l...).Set(float64(p.Ready))
		m.fill.WithLabelValues(l...).Set(p.QueueFill())
		m.util.WithLabelValues(l...).Set(p.Utilisation())
		m.parked.WithLabelValues(l...).Set(float64(q.parked[p.Name]))
		if lane, ok := q.slowLanes[p.Name]; ok {
			m.laneSlots.WithLabelValues(l...).Set(float64(lane.Slots))
			m.laneRunning.WithLabelValues(l...).Set(float64(q.lanes[p.Name].Running))
		} else {
			m.laneSlots.DeleteLabelValues(l...)
			m.laneRunning.DeleteLabelValues(l...)
		}
		for kind, n := range q.limited[p.Name] {
			// A leader's first look adds all the store counted.
			k := p.Name + " " + kind
			if d := n - e.limitedSeen[k]; d > 0 {
				m.limited.WithLabelValues(r, p.Name, kind).Add(float64(d))
			}
			e.limitedSeen[k] = n
		}
	}
}

// publishedSlots is what pool p publishes as its slots, live its live
// workers' concurrency summed: the least of the two (a task placed on
// slots no worker runs waits; slots past the configured ones are capacity
// the operator did not price or plan). Workers offering more than
// configured are logged once per change of their sum.
func (e *exported) publishedSlots(p Pool, live int, log *slog.Logger) int {
	if p.Slots <= 0 || live <= p.Slots {
		delete(e.overSlots, p.Name)
		return live
	}
	if e.overSlots[p.Name] != live {
		e.overSlots[p.Name] = live
		log.Warn("pool's live workers offer more slots than configured; publishing the configured slots",
			"pool", p.Name, "workers_slots", live, "slots", p.Slots)
	}
	return p.Slots
}

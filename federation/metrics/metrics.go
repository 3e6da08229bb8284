package metrics

import (
	"github.com/ax-sched/ax/internal/labelcap"
	"github.com/ax-sched/ax/placement"
	"github.com/prometheus/client_golang/prometheus"
)

// Caps of the tenant and type label values of ax_tasks_submitted_total
// (internal/labelcap): a submitter inventing names costs one series; the
// type cap is each tenant's own.
const (
	maxTenantLabels = 50
	maxTypeLabels   = 50
)

// Metrics of the federation layer (ax_ prefix).
type Metrics struct {
	Submitted  *prometheus.CounterVec
	Rejected   *prometheus.CounterVec
	Refusals   *prometheus.CounterVec // ax_pool_refusals_total
	Handoffs   *prometheus.CounterVec
	Forwarded  *prometheus.CounterVec
	Placements *prometheus.CounterVec
	BudgetUsed *prometheus.GaugeVec // ax_tenant_budget_used_ratio
	HeldAge    *prometheus.GaugeVec // ax_handoffs_held_oldest_age_seconds

	types *labelcap.Scoped // tenant → its types
}

// New registers with reg (nil: not registered).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Submitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_tasks_submitted_total",
			Help: "Tasks accepted by this server."}, []string{"region", "tenant", "type"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_tasks_rejected_total",
			Help: "Submissions refused, by reason (unplaceable, saturated, unregistered, backlog, memory_reserve)."}, []string{"region", "reason"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_pool_refusals_total",
			Help: "Submissions this server refused as saturated (429), counted once for each pool that was saturated for it " +
				"(target: the pool's region): the backpressure of each pool."}, []string{"region", "target", "pool"}),
		Handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_handoffs_total",
			Help: "Hand-off attempts by outcome (accepted, refused, retry)."}, []string{"region", "target", "outcome"}),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_forwarded_requests_total",
			Help: "Requests Forwarded to another region (keyed submits, reads, cancels)."}, []string{"region", "target"}),
		Placements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_placement_decisions_total",
			Help: "Placement decisions of this region's server by outcome (placed, no_capacity, unplaceable, saturated), " +
				"with the chosen region (target) and pool when placed."}, []string{"region", "target", "pool", "outcome"}),
		BudgetUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_tenant_budget_used_ratio",
			Help: "A tenant's spend this UTC month (every region's cost records, reread every 30 s) ÷ its monthly_budget_usd; " +
				"only tenants with a budget in the config (bounded by it)."}, []string{"tenant"}),
		HeldAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_handoffs_held_oldest_age_seconds",
			Help: "Age of the oldest hand-off this region holds unrun until its sender's word, as its leader last looked (every second); " +
				"0: none held past a second. Only the region's leader has the series."}, []string{"region"}),
		types: labelcap.NewScoped(maxTenantLabels, maxTypeLabels),
	}
	if reg != nil {
		reg.MustRegister(m.Submitted, m.Rejected, m.Refusals, m.Handoffs, m.Forwarded, m.Placements, m.BudgetUsed, m.HeldAge)
	}
	return m
}

// Init makes the region's bounded series exist at zero, so rates and
// alerts see them before the first event.
func (m *Metrics) Init(region string, pools []string) {
	for _, r := range []string{"unplaceable", "saturated"} {
		m.Rejected.WithLabelValues(region, r)
	}
	for _, p := range pools {
		m.Refusals.WithLabelValues(region, region, p)
	}
	for _, o := range []string{"no_capacity", "unplaceable", "saturated"} {
		m.Placements.WithLabelValues(region, "", "", o)
	}
}

// Decision counts a placement decision made by this region's server.
func (m *Metrics) Decision(region string, d placement.Decision) {
	switch {
	case d.OK:
		m.Placements.WithLabelValues(region, d.Region, d.Pool, "placed").Inc()
	case d.Unplaceable():
		m.Placements.WithLabelValues(region, "", "", "unplaceable").Inc()
	case d.AllSaturated():
		m.Placements.WithLabelValues(region, "", "", "saturated").Inc()
	default:
		m.Placements.WithLabelValues(region, "", "", "no_capacity").Inc()
	}
}

// Saturated counts a submission refused as saturated: in
// ax_tasks_rejected_total, and in ax_pool_refusals_total against every pool
// the explanation found SATURATED and every local pool whose store refused
// it as full (its admission limit, which the snapshot may not show yet).
func (m *Metrics) Saturated(region string, ex placement.Explanation, full map[string]bool) {
	m.Rejected.WithLabelValues(region, "saturated").Inc()
	for _, c := range ex.Candidates {
		if c.Reason == placement.ReasonSaturated || (c.Region == region && full[c.Pool]) {
			m.Refusals.WithLabelValues(region, c.Region, c.Pool).Inc()
		}
	}
}

// Submit counts an accepted task.
func (m *Metrics) Submit(region, tenant, typ string) {
	tenant, typ = m.types.Values(tenant, typ)
	m.Submitted.WithLabelValues(region, tenant, typ).Inc()
}

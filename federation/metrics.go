package federation

import (
	"github.com/ax-sched/ax/internal/labelcap"
	"github.com/ax-sched/ax/placement"
	"github.com/prometheus/client_golang/prometheus"
)

// Caps of the tenant and type label values of ax_tasks_submitted_total
// (internal/labelcap): a submitter inventing names costs one series.
const (
	maxTenantLabels = 50
	maxTypeLabels   = 50
)

// Metrics of the federation layer (ax_ prefix).
type Metrics struct {
	submitted  *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	refusals   *prometheus.CounterVec // ax_pool_refusals_total
	handoffs   *prometheus.CounterVec
	forwarded  *prometheus.CounterVec
	placements *prometheus.CounterVec
	budgetUsed *prometheus.GaugeVec // ax_tenant_budget_used_ratio

	tenants, types *labelcap.Set
}

// NewMetrics registers with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_tasks_submitted_total",
			Help: "Tasks accepted by this server."}, []string{"region", "tenant", "type"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_tasks_rejected_total",
			Help: "Submissions refused, by reason (unplaceable, saturated, invalid)."}, []string{"region", "reason"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_pool_refusals_total",
			Help: "Submissions this server refused as saturated (429), counted once for each pool that was saturated for it " +
				"(target: the pool's region): the backpressure of each pool."}, []string{"region", "target", "pool"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_handoffs_total",
			Help: "Hand-off attempts by outcome (accepted, refused, retry)."}, []string{"region", "target", "outcome"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_forwarded_requests_total",
			Help: "Requests forwarded to another region (keyed submits, reads, cancels)."}, []string{"region", "target"}),
		placements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_placement_decisions_total",
			Help: "Placement decisions of this region's server by outcome (placed, no_capacity, unplaceable, saturated), " +
				"with the chosen region (target) and pool when placed."}, []string{"region", "target", "pool", "outcome"}),
		budgetUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_tenant_budget_used_ratio",
			Help: "A tenant's spend this UTC month (every region's cost records, reread every 30 s) ÷ its monthly_budget_usd; " +
				"only tenants with a budget in the config (bounded by it)."}, []string{"tenant"}),
		tenants: labelcap.New(maxTenantLabels),
		types:   labelcap.New(maxTypeLabels),
	}
	if reg != nil {
		reg.MustRegister(m.submitted, m.rejected, m.refusals, m.handoffs, m.forwarded, m.placements, m.budgetUsed)
	}
	return m
}

// init makes the region's bounded series exist at zero, so rates and
// alerts see them before the first event.
func (m *Metrics) init(region string, pools []string) {
	for _, r := range []string{"unplaceable", "saturated"} {
		m.rejected.WithLabelValues(region, r)
	}
	for _, p := range pools {
		m.refusals.WithLabelValues(region, region, p)
	}
	for _, o := range []string{"no_capacity", "unplaceable", "saturated"} {
		m.placements.WithLabelValues(region, "", "", o)
	}
}

// decision counts a placement decision made by this region's server.
func (m *Metrics) decision(region string, d placement.Decision) {
	switch {
	case d.OK:
		m.placements.WithLabelValues(region, d.Region, d.Pool, "placed").Inc()
	case d.Unplaceable():
		m.placements.WithLabelValues(region, "", "", "unplaceable").Inc()
	case d.AllSaturated():
		m.placements.WithLabelValues(region, "", "", "saturated").Inc()
	default:
		m.placements.WithLabelValues(region, "", "", "no_capacity").Inc()
	}
}

// saturated counts a submission refused as saturated: in
// ax_tasks_rejected_total, and in ax_pool_refusals_total against every pool
// the explanation found SATURATED and every local pool whose store refused
// it as full (its admission limit, which the snapshot may not show yet).
func (m *Metrics) saturated(region string, ex placement.Explanation, full map[string]bool) {
	m.rejected.WithLabelValues(region, "saturated").Inc()
	for _, c := range ex.Candidates {
		if c.Reason == placement.ReasonSaturated || (c.Region == region && full[c.Pool]) {
			m.refusals.WithLabelValues(region, c.Region, c.Pool).Inc()
		}
	}
}

// submit counts an accepted task.
func (m *Metrics) submit(region, tenant, typ string) {
	m.submitted.WithLabelValues(region, m.tenants.Value(tenant), m.types.Value(typ)).Inc()
}

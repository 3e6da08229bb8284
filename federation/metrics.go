package federation

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the federation layer (ax_ prefix).
type Metrics struct {
	submitted  *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	handoffs   *prometheus.CounterVec
	forwarded  *prometheus.CounterVec
	placements *prometheus.CounterVec
}

// NewMetrics registers with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_tasks_submitted_total",
			Help: "Tasks accepted by this server."}, []string{"region", "tenant", "type"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_tasks_rejected_total",
			Help: "Submissions refused, by reason (unplaceable, saturated, invalid)."}, []string{"region", "reason"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_handoffs_total",
			Help: "Hand-off attempts by outcome (accepted, refused, retry)."}, []string{"region", "target", "outcome"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_forwarded_requests_total",
			Help: "Requests forwarded to another region (keyed submits, reads, cancels)."}, []string{"region", "target"}),
		placements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_placement_decisions_total",
			Help: "Placement decisions by chosen region and pool."}, []string{"region", "pool"}),
	}
	if reg != nil {
		reg.MustRegister(m.submitted, m.rejected, m.handoffs, m.forwarded, m.placements)
	}
	return m
}

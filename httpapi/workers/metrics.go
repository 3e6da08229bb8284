package workers

import "github.com/prometheus/client_golang/prometheus"

// metrics of the remote workers this server serves, beside the direct
// workers' own (docs/metrics.md).
type metrics struct {
	claims     *prometheus.CounterVec
	reports    *prometheus.CounterVec
	registered *prometheus.CounterVec
	refused    prometheus.Counter
	longPolls  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_remote_worker_claims_total",
			Help: "Tasks this server claimed for remote workers and handed to them, by pool and route (claim: the claim route; report: a report's claim)."},
			[]string{"pool", "route"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_remote_worker_reports_total",
			Help: "Outcomes remote workers reported to this server, by pool and outcome (success, failure, return, lease_lost)."},
			[]string{"pool", "outcome"}),
		registered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_remote_worker_registrations_total",
			Help: "Remote workers that registered with this server, by pool."}, []string{"pool"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "ax_remote_worker_refused_total",
			Help: "Claimed tasks given back unseen because their tenant is outside the worker's token."}),
		longPolls: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_remote_worker_long_polls",
			Help: "Remote workers' claims waiting on this server now."}),
	}
	if reg != nil {
		reg.MustRegister(m.claims, m.reports, m.registered, m.refused, m.longPolls)
	}
	return m
}

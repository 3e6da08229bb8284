package fedtest

import (
	"github.com/prometheus/client_golang/prometheus"
)

// CounterValue is the value of the counter name with exactly these labels
// among what g gathers (0 when it has none yet: a counter vector shows a
// label set only once it was counted; -1 when g fails).
func CounterValue(g prometheus.Gatherer, name string, labels map[string]string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

package server

import (
	"testing"

	"github.com/ax-sched/ax/internal/config"
)

// Savings count against the cheapest on-demand pool that carries every tag
// of the task, after its discount; spot pools never set the reference.
func TestReferencePriceIsTheCheapestEligibleOnDemandPool(t *testing.T) {
	cfg := &config.Region{Name: "cost-test", Pools: []config.Pool{
		{Name: "od", Tags: map[string]string{"cpu": "x86"}, PricePerSlotHour: 0.048},
		{Name: "od-big", Tags: map[string]string{"cpu": "x86", "mem": "high"}, PricePerSlotHour: 0.2, Discount: 0.5},
		{Name: "spot", Tags: map[string]string{"cpu": "x86"}, PricePerSlotHour: 0.5, Spot: true},
	}}
	for _, c := range []struct {
		tags map[string]string
		want float64
	}{
		{map[string]string{"cpu": "x86"}, 0.048},
		{map[string]string{"cpu": "x86", "mem": "high"}, 0.1},
		{map[string]string{"mem": "low"}, 0},
		{nil, 0.048},
	} {
		if got := referencePrice(cfg, c.tags); got != c.want {
			t.Errorf("referencePrice(%v) = %v, want %v", c.tags, got, c.want)
		}
	}
}

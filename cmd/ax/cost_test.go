package main

import (
	"math"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Cost counters match price × run time for a set of completed tasks, and
// savings are counted against the dearest eligible on-demand pool.
func TestCostCountersMatchPriceTimesRunTime(t *testing.T) {
	cfg := &config.Region{Name: "cost-test", Pools: []config.Pool{
		{Name: "od", Tags: map[string]string{"cpu": "x86"}, PricePerSlotHour: 0.048},
		{Name: "spot", Tags: map[string]string{"cpu": "x86"}, PricePerSlotHour: 0.017, Spot: true},
	}}
	obs := costObserver(cfg, "spot")
	runs := []time.Duration{90 * time.Second, 30 * time.Minute, 1500 * time.Millisecond}
	want, wantSaved := 0.0, 0.0
	for _, d := range runs {
		tk := &worker.Task{Type: "etl", Tenant: "acme", Price: 0.017, Tags: map[string]string{"cpu": "x86"}}
		obs(tk, task.Success, d)
		want += 0.017 * d.Hours()
		wantSaved += (0.048 - 0.017) * d.Hours()
	}
	// A lost lease is another worker's outcome: not counted here.
	obs(&worker.Task{Type: "etl", Tenant: "acme", Price: 0.017}, "", time.Hour)
	got := testutil.ToFloat64(costDollars.WithLabelValues("cost-test", "spot", "acme", "etl"))
	saved := testutil.ToFloat64(savingsDollars.WithLabelValues("cost-test", "spot", "acme", "etl"))
	if math.Abs(got-want) > 1e-12 || math.Abs(saved-wantSaved) > 1e-12 {
		t.Fatalf("cost %.9f (want %.9f), savings %.9f (want %.9f)", got, want, saved, wantSaved)
	}
}

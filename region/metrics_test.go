package region

import (
	"context"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// series counts the series of a family in reg.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// The leader exports the starvation gauge (READY tasks waiting past the
// threshold, by pool and priority), the DLQ size and PENDING; when its term
// ends those figures leave its registry, so only the new leader's remain.
func TestLeaderExportsStarvationAndDLQAndForgetsThemAfterItsTerm(t *testing.T) {
	h := newHarness(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	short := func(c *Config) { c.StarvationThreshold = 300 * time.Millisecond }
	a, stopA := h.startCell("a", NewMetrics(regA), short)
	waitFor(t, 10*time.Second, "a leads", a.Leading)
	b, _ := h.startCell("b", NewMetrics(regB), short)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		h.submitDelayed(0)
	}
	// One dead letter: claimed, failed for good.
	dead := h.submitDelayed(0)
	waitFor(t, 3*time.Second, "READY", func() bool { return h.state(dead) == task.Ready })
	ts, err := h.store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 1})
	if err != nil || len(ts) != 1 {
		t.Fatalf("claim: %d %v", len(ts), err)
	}
	if _, _, err := h.store.Claimer().Fail(ctx, queue.Failure{ID: ts[0].ID, Token: ts[0].LeaseToken, Error: "no"}); err != nil {
		t.Fatal(err)
	}
	m := a.metrics
	waitFor(t, 5*time.Second, "3 starving tasks of priority 2 and 1 dead letter", func() bool {
		return testutil.ToFloat64(m.starving.WithLabelValues("eu-west", "cpu", "2")) == 3 &&
			testutil.ToFloat64(m.dead.WithLabelValues("eu-west")) == 1
	})
	if v := testutil.ToFloat64(m.starving.WithLabelValues("eu-west", "cpu", "0")); v != 0 {
		t.Fatalf("starving priority 0: %v", v)
	}
	// The figures it publishes (GET /v1/regions, the dashboard) count them too.
	waitFor(t, 5*time.Second, "3 starving tasks in the published figures", func() bool {
		for _, p := range a.Figures().Pools {
			if p.Name == "cpu" {
				return p.Starving == 3
			}
		}
		return false
	})
	// The standby exports neither the gauges nor the counters the leader
	// reads from the store.
	for _, name := range []string{"ax_tasks_starving", "ax_limited_total", "ax_fair_stale_claims_total"} {
		if n := series(t, regB, name); n != 0 {
			t.Fatalf("the standby exports %d series of %s", n, name)
		}
	}
	if n := series(t, regA, "ax_limited_total"); n != 4 {
		t.Fatalf("the leader exports %d series of ax_limited_total, want 4 (cpu × rate, concurrency, paused, slow)", n)
	}
	stopA()
	waitFor(t, 5*time.Second, "b leads", b.Leading)
	for _, name := range []string{"ax_tasks_starving", "ax_dlq_tasks", "ax_tasks_pending", "ax_pool_ready", "ax_limited_total", "ax_fair_stale_claims_total"} {
		if n := series(t, regA, name); n != 0 {
			t.Errorf("the former leader still exports %d series of %s", n, name)
		}
	}
	waitFor(t, 5*time.Second, "the new leader's figures", func() bool {
		return testutil.ToFloat64(b.metrics.starving.WithLabelValues("eu-west", "cpu", "2")) == 3 &&
			testutil.ToFloat64(b.metrics.dead.WithLabelValues("eu-west")) == 1
	})
	if n := series(t, regB, "ax_limited_total"); n != 4 {
		t.Errorf("the new leader exports %d series of ax_limited_total, want 4", n)
	}
	if v := testutil.ToFloat64(b.metrics.leaderChanges.WithLabelValues("eu-west")); v != 1 {
		t.Fatalf("b's leader changes: %v", v)
	}
}

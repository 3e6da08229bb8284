package store_test

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

// Starving counts READY tasks by pool and priority, and due tasks waiting
// for placement, that have waited longer than the threshold, over every
// shard; a task claimed, or one that became READY later, is not counted.
func TestStarvingCountsLongWaitsBySet(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	e.submit("cpu")
	e.submit("cpu")
	e.submit("cpu", prio(0))
	e.submit("gpu", prio(4))
	e.submit("") // unplaced: due, waiting for placement
	e.submit("")
	e.clock.Advance(11 * time.Minute)
	e.submit("cpu") // fresh: not starving
	e.submit("")
	got, err := e.s.Starving(e.ctx, []string{"cpu", "gpu", "idle"}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := queue.Starving{Ready: map[string][task.MaxPriority + 1]int{
		"cpu": {1, 0, 2, 0, 0}, "gpu": {0, 0, 0, 0, 1}, "idle": {},
	}, Unplaced: 2, Tenants: map[string]map[string]int{"cpu": {"default": 2}, "gpu": {"default": 1}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("starving (-want +got):\n%s", d)
	}
	// Claimed tasks stop starving.
	ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 10})
	if err != nil || len(ts) != 4 {
		t.Fatalf("claim: %d %v", len(ts), err)
	}
	got, err = e.s.Starving(e.ctx, []string{"cpu"}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Ready["cpu"]; n != [task.MaxPriority + 1]int{} {
		t.Fatalf("cpu after claiming every cpu task: %v", n)
	}
}

// In a pool with a fair share, Starving counts each tenant's long waits:
// the flooding tenant starves, the one the share serves first does not.
func TestStarvingByTenantInFairPools(t *testing.T) {
	e := newEnv(t, oneShard) // one claim sees every task
	e.setFair(map[string]queue.FairShare{"cpu": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}, "b": {Weight: 1}}}})
	e.submitMany("cpu", "a", 30)
	e.submitMany("cpu", "b", 3)
	e.submitMany("gpu", "a", 2) // no fair share in gpu: from its tasks' records
	e.clock.Advance(11 * time.Minute)
	e.submitMany("cpu", "b", 2) // fresh
	if ts := e.claim("cpu", 6); tenants(ts)["b"] != 3 {
		t.Fatalf("claimed %v, want b's 3 starving tasks among them (equal weights)", tenants(ts))
	}
	got, err := e.s.Starving(e.ctx, []string{"cpu", "gpu"}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{"cpu": {"a": 27, "b": 0}, "gpu": {"a": 2}}
	if d := cmp.Diff(want, got.Tenants); d != "" {
		t.Fatalf("starving by tenant (-want +got):\n%s", d)
	}
}

// In a pool without a fair share, Starving counts each tenant's long waits
// from its oldest starving tasks' records: exact up to tenantSample, past
// it scaled to the pool's total (3:1 submitted in turns: 300 and 100 of
// 400 from the oldest 256); priority 0 and fresh tasks are not counted.
func TestStarvingByTenantWithoutFairShare(t *testing.T) {
	e := newEnv(t, oneShard)
	e.submitMany("few", "a", 2)
	e.submitMany("few", "b", 1, prio(0))
	for range 100 {
		e.submitMany("many", "a", 3)
		e.submitMany("many", "b", 1)
		e.clock.Advance(time.Millisecond)
	}
	e.clock.Advance(11 * time.Minute)
	e.submitMany("few", "b", 5) // fresh
	got, err := e.s.Starving(e.ctx, []string{"few", "many", "idle"}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{"few": {"a": 2}, "many": {"a": 300, "b": 100}}
	if d := cmp.Diff(want, got.Tenants); d != "" {
		t.Fatalf("starving by tenant (-want +got):\n%s", d)
	}
}

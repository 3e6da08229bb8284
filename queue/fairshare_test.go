package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

func tenantOf(tn string) func(*task.Spec) { return func(s *task.Spec) { s.Tenant = tn } }

func (e *env) setFair(pools map[string]FairShare) {
	e.t.Helper()
	if err := e.s.SetFairShare(e.ctx, leader, pools); err != nil {
		e.t.Fatal(err)
	}
}

// submitMany accepts n tasks of tenant tn into pool, in batches.
func (e *env) submitMany(pool, tn string, n int, mod ...func(*task.Spec)) {
	e.t.Helper()
	mod = append(mod, tenantOf(tn))
	sp := e.spec(mod...)
	for n > 0 {
		b := min(n, MaxBatch)
		ts := make([]NewTask, b)
		for i := range ts {
			ts[i] = NewTask{Spec: sp, Pool: pool, Pinned: true}
		}
		res, err := e.s.Submit(e.ctx, ts...)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				e.t.Fatal(r.Err)
			}
		}
		n -= b
	}
}

func (e *env) complete(ts ...*task.Task) {
	e.t.Helper()
	cs := make([]Completion, len(ts))
	for i, t := range ts {
		cs[i] = Completion{ID: t.ID, Token: t.LeaseToken}
	}
	errs, err := e.s.Complete(e.ctx, cs...)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

func tenants(ts []*task.Task) map[string]int {
	m := map[string]int{}
	for _, t := range ts {
		m[t.Tenant]++
	}
	return m
}

// Two tenants weighted 3:1 on a saturated pool of 24 slots: as slots free
// one at a time, a gets three of every four (±10 % over 400 claims), however
// many each has waiting; the running counts the store keeps agree.
func TestFairShareWeights(t *testing.T) {
	e := newEnv(t)
	e.setFair(map[string]FairShare{"p": {Tenants: map[string]TenantShare{"a": {Weight: 3}, "b": {Weight: 1}}}})
	e.submitMany("p", "a", 600)
	e.submitMany("p", "b", 600)
	running := e.claim("p", 24)
	if len(running) != 24 {
		t.Fatalf("claimed %d, want 24", len(running))
	}
	got := map[string]int{}
	for i := 0; i < 400; i++ {
		e.complete(running[0])
		running = running[1:]
		ts := e.claim("p", 1)
		if len(ts) != 1 {
			t.Fatalf("claim %d: got %d tasks", i, len(ts))
		}
		got[ts[0].Tenant]++
		running = append(running, ts...)
	}
	ratio := float64(got["a"]) / float64(got["b"])
	if ratio < 2.7 || ratio > 3.3 {
		t.Errorf("claims a:b = %d:%d (%.2f), want 3:1 ± 10 %%", got["a"], got["b"], ratio)
	}
	fr, err := e.s.FairRunning(e.ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if want := tenants(running); fr["a"] != want["a"] || fr["b"] != want["b"] {
		t.Errorf("store's running counts %v, want %v", fr, want)
	}
}

// A tenant with a floor of 4 gets 4 slots from the first claims after it
// submits, though another tenant holds every slot and has 100 000 tasks
// waiting ahead of it; idle share is borrowed (a alone took every slot), a
// max caps a tenant even when the pool is otherwise idle, and past the
// floor weights share.
func TestFairShareFloorAndMax(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setFair(map[string]FairShare{"p": {Tenants: map[string]TenantShare{"a": {Max: 12}, "b": {Floor: 4}}}})
	backlog := 100000
	if testing.Short() {
		backlog = 10000
	}
	e.submitMany("p", "a", backlog)
	running := e.claim("p", 20)
	if len(running) != 12 {
		t.Fatalf("a alone claimed %d, want its max 12", len(running))
	}
	e.setFair(map[string]FairShare{"p": {Tenants: map[string]TenantShare{"a": {Weight: 4}, "b": {Floor: 4}}}})
	running = append(running, e.claim("p", 4)...)
	if n := tenants(running)["a"]; n != 16 {
		t.Fatalf("a runs %d with no max and the pool idle, want all 16 slots", n)
	}
	e.submitMany("p", "b", 10)
	// The pool's 16 slots are full: b gets each slot that frees until it has 4.
	var b []*task.Task
	for i := 0; i < 6; i++ {
		e.complete(running[0])
		running = running[1:]
		ts := e.claim("p", 1)
		running = append(running, ts...)
		if i < 4 && (len(ts) != 1 || ts[0].Tenant != "b") {
			t.Fatalf("claim %d after b submitted took %v, want b's task (floor 4)", i, tenants(ts))
		}
		if i >= 4 {
			if len(ts) != 1 || ts[0].Tenant != "a" {
				t.Errorf("claim %d: past its floor b runs 4 ÷ weight 1, a 12 ÷ 4: want a, got %v", i, tenants(ts))
			}
		}
		b = append(b, ts...)
	}
	if got := tenants(running); got["b"] != 4 || got["a"] != 12 {
		t.Errorf("running %v, want b 4 (its floor), a 12", got)
	}
}

// Priorities compose: priority 0 is strict (before any tenant's share),
// within a tenant bounded aging orders priorities 1..4 as without fair
// share, and a task that left its ready set another way (cancel, a
// priority change) is never claimed from the tenant index.
func TestFairSharePrioritiesAndLazyRemoval(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setFair(map[string]FairShare{"p": {Tenants: map[string]TenantShare{"a": {Weight: 1}, "b": {Weight: 1}}}})
	a3 := e.submit("p", tenantOf("a"), prio(3))
	a1 := e.submit("p", tenantOf("a"), prio(1))
	b2 := e.submit("p", tenantOf("b"), prio(2))
	b2gone := e.submit("p", tenantOf("b"), prio(2))
	a0 := e.submit("p", tenantOf("a"), prio(0))
	if _, err := e.s.Cancel(e.ctx, b2gone, "test", "t"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.SetPriority(e.ctx, a3, 4, "t"); err != nil {
		t.Fatal(err)
	}
	var order []string
	for i := 0; i < 5; i++ {
		ts := e.claim("p", 1)
		if len(ts) == 0 {
			break
		}
		order = append(order, ts[0].ID)
	}
	// a0 strict first (a now runs 1), then b (runs 0), then a's own by
	// priority: a1 before a3 (now 4).
	want := []string{a0, b2, a1, a3}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("claim order %v, want %v (a0 b2 a1 a3)", order, want)
	}
	if ks := e.keys(e.s.keys[0].prefix + "fq:*"); len(ks) != 0 {
		t.Errorf("tenant sets left after every task was claimed: %v", ks)
	}
}

// Every way back to READY keeps the tenant index: a returned task and a
// retried one (after promotion) are claimed again under their tenant's
// share, and their slots came back. Removing the pool's fair share leaves
// no fair-share key behind.
func TestFairShareReadyPathsAndOff(t *testing.T) {
	e := newEnv(t, oneShard) // a max of 1 is 1 per shard
	e.setFair(map[string]FairShare{"p": {Tenants: map[string]TenantShare{"a": {Max: 1}}}})
	e.submitMany("p", "a", 2, retries(3))
	ts := e.claim("p", 2)
	if len(ts) != 1 {
		t.Fatalf("claimed %d, want 1 (a's max)", len(ts))
	}
	if _, err := e.s.Return(e.ctx, ts[0].ID, ts[0].LeaseToken, task.ReasonWorkerShutdown, 0); err != nil {
		t.Fatal(err)
	}
	ts = e.claim("p", 2)
	if len(ts) != 1 {
		t.Fatalf("after a return claimed %d, want 1", len(ts))
	}
	if _, _, err := e.s.Fail(e.ctx, Failure{ID: ts[0].ID, Token: ts[0].LeaseToken, Error: "x", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	ts = e.claim("p", 2)
	if len(ts) != 1 {
		t.Fatalf("after a failure claimed %d, want the other task", len(ts))
	}
	e.complete(ts...)
	e.clock.Advance(time.Hour)
	if _, err := e.s.Promote(e.ctx, leader, 10); err != nil {
		t.Fatal(err)
	}
	ts = e.claim("p", 2)
	if len(ts) != 1 || ts[0].Attempts != 2 {
		t.Fatalf("the retried task: claimed %v", ts)
	}
	e.complete(ts...)
	fr, _ := e.s.FairRunning(e.ctx, "p")
	if len(fr) != 0 {
		t.Errorf("running counts %v after every task ended, want none", fr)
	}
	e.submitMany("p", "a", 3)
	e.setFair(nil)
	for _, pat := range []string{"fs:*", "fi:*", "fq:*", "fr:*", "fsp"} {
		for i := range e.s.keys {
			if ks := e.keys(e.s.keys[i].prefix + pat); len(ks) != 0 {
				t.Errorf("fair share off: %v left", ks)
			}
		}
	}
	if ts := e.claim("p", 10); len(ts) != 3 {
		t.Errorf("fair share off: claimed %d, want all 3", len(ts))
	}
}

// BenchmarkClaimFairShare: claim.lua and complete.lua per task without and
// with a fair share on the pool, tasks of two tenants weighted 3:1 that
// alternate (each claim of 32 gives slots to both).
func BenchmarkClaimFairShare(b *testing.B) {
	var sp [2]*task.Spec
	for i, tn := range []string{"a", "b"} {
		s := benchSpec(b)
		s.Tenant = tn
		sp[i] = s
	}
	benchClaimArms(b, func(ctx context.Context, on *Store) error {
		return on.SetFairShare(ctx, Fence{Name: "region", Token: 1}, map[string]FairShare{
			"cpu": {Tenants: map[string]TenantShare{"a": {Weight: 3}, "b": {Weight: 1}}},
		})
	}, func(i int) *task.Spec { return sp[i%2] })
}

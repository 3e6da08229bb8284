package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

func tenantOf(tn string) func(*task.Spec) { return func(s *task.Spec) { s.Tenant = tn } }

func (e *env) setFair(pools map[string]queue.FairShare) {
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
		b := min(n, queue.MaxBatch)
		ts := make([]queue.NewTask, b)
		for i := range ts {
			ts[i] = queue.NewTask{Spec: sp, Pool: pool, Pinned: true}
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
	cs := make([]queue.Completion, len(ts))
	for i, t := range ts {
		cs[i] = queue.Completion{ID: t.ID, Token: t.LeaseToken}
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
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 3}, "b": {Weight: 1}}}})
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
	if want := tenants(running); fr["a"] != 1000*want["a"] || fr["b"] != 1000*want["b"] {
		t.Errorf("store's running milli-slots %v, want 1000 × %v", fr, want)
	}
}

// A tenant with a floor of 4 gets 4 slots from the first claims after it
// submits, though another tenant holds every slot and has 100 000 tasks
// waiting ahead of it; idle share is borrowed (a alone took every slot), a
// max caps a tenant even when the pool is otherwise idle, and past the
// floor weights share.
func TestFairShareFloorAndMax(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Max: 12}, "b": {Floor: 4}}}})
	backlog := 100000
	if testing.Short() {
		backlog = 10000
	}
	e.submitMany("p", "a", backlog)
	running := e.claim("p", 20)
	if len(running) != 12 {
		t.Fatalf("a alone claimed %d, want its max 12", len(running))
	}
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 4}, "b": {Floor: 4}}}})
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
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}, "b": {Weight: 1}}}})
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
	if ks := e.keys(e.s.Prefix(0) + "fq:*"); len(ks) != 0 {
		t.Errorf("tenant sets left after every task was claimed: %v", ks)
	}
}

// Every way back to READY keeps the tenant index: a returned task and a
// retried one (after promotion) are claimed again under their tenant's
// share, and their slots came back. Removing the pool's fair share leaves
// no fair-share key behind.
func TestFairShareReadyPathsAndOff(t *testing.T) {
	e := newEnv(t, oneShard) // a max of 1 is 1 per shard
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Max: 1}}}})
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
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: ts[0].ID, Token: ts[0].LeaseToken, Error: "x", Retryable: true}); err != nil {
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
		for i := range e.s.Shards() {
			if ks := e.keys(e.s.Prefix(i) + pat); len(ks) != 0 {
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
	benchClaimArms(b, func(ctx context.Context, on *stageSet) error {
		return on.SetFairShare(ctx, queue.Fence{Name: "region", Token: 1}, map[string]queue.FairShare{
			"cpu": {Tenants: map[string]queue.TenantShare{"a": {Weight: 3}, "b": {Weight: 1}}},
		})
	}, func(i int) *task.Spec { return sp[i%2] })
}

// A claim shares its slots out on the tenants' scores, then draws each
// tenant's share from the sets its priority mask names: 3:1 weights split
// a claim of 8 as one slot at a time would (6:2); a tenant whose sets hold
// stale entries (cancelled tasks) or run out leaves its slots to the others
// in the same claim; the mask follows the sets, is learnt again when
// missing, and a tenant whose sets empty leaves the index; a claimer that
// filters types leaves what it passed over in the tenant's set.
func TestFairShareMasksAndShortfall(t *testing.T) {
	e := newEnv(t, oneShard)
	pre := e.s.Prefix(0)
	mask := func(tn string) (string, bool) {
		v, err := e.s.Client().HGet(e.ctx, pre+"fr:p", "^"+tn).Result()
		return v, err == nil
	}
	indexed := func(tn string) bool { return e.s.Client().ZScore(e.ctx, pre+"fi:p", tn).Err() == nil }

	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 3}, "b": {Weight: 1}}}})
	e.submitMany("p", "a", 8)
	e.submitMany("p", "b", 8)
	if got := tenants(e.claim("p", 8)); got["a"] != 6 || got["b"] != 2 {
		t.Fatalf("a claim of 8 at 3:1 took %v, want a 6, b 2", got)
	}

	e = newEnv(t, oneShard)
	pre = e.s.Prefix(0)
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}, "b": {Weight: 1}}}})
	var a1 []string
	for range 3 {
		a1 = append(a1, e.submit("p", tenantOf("a"), prio(1)))
	}
	a3 := []string{e.submit("p", tenantOf("a"), prio(3)), e.submit("p", tenantOf("a"), prio(3))}
	e.submitMany("p", "b", 10, prio(2))
	if m, _ := mask("a"); m != "13" {
		t.Errorf("a's mask %q, want 13", m)
	}
	if m, _ := mask("b"); m != "2" {
		t.Errorf("b's mask %q, want 2", m)
	}
	for _, id := range a1[:2] {
		if _, err := e.s.Cancel(e.ctx, id, "test", "t"); err != nil {
			t.Fatal(err)
		}
	}
	// 8 slots at 1:1 give a 4 on scores; it has 3 live tasks behind 2
	// stale entries: b takes the slot a leaves, in the same claim.
	ts := e.claim("p", 8)
	if got := tenants(ts); len(ts) != 8 || got["a"] != 3 || got["b"] != 5 {
		t.Fatalf("claimed %v, want a 3, b 5", got)
	}
	var order []string
	for _, tk := range ts {
		if tk.Tenant == "a" {
			order = append(order, tk.ID)
		}
	}
	if want := []string{a1[2], a3[0], a3[1]}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("a's tasks in order %v, want %v", order, want)
	}
	if ks := e.keys(pre + "fq:p:*:a"); len(ks) != 0 {
		t.Errorf("a's sets left after its last task was claimed: %v", ks)
	}
	if m, ok := mask("a"); m != "" || !ok || indexed("a") {
		t.Errorf("a emptied: mask %q (%v), indexed %v; want \"\", out of the index", m, ok, indexed("a"))
	}
	fr, _ := e.s.FairRunning(e.ctx, "p")
	if fr["a"] != 3000 || fr["b"] != 5000 || len(fr) != 2 {
		t.Errorf("running counts %v, want a 3, b 5", fr)
	}

	// A mask missing (a tenant indexed before masks): the claim reads every
	// set of the tenant and writes what it found.
	if err := e.s.Client().HDel(e.ctx, pre+"fr:p", "^b").Err(); err != nil {
		t.Fatal(err)
	}
	if ts := e.claim("p", 2); len(ts) != 2 || ts[0].Tenant != "b" {
		t.Fatalf("with b's mask unknown claimed %v, want 2 of b's", tenants(ts))
	}
	if m, _ := mask("b"); m != "2" {
		t.Errorf("b's mask learnt %q, want 2", m)
	}

	// A claimer of type y only: a's tasks of type x stay in a's set, the
	// mask keeps their priority; a claimer of every type takes them.
	x := []string{e.submit("p", tenantOf("a"), typeOf("x")), e.submit("p", tenantOf("a"), typeOf("x"))}
	y := e.submit("p", tenantOf("a"), typeOf("y"))
	if !indexed("a") {
		t.Fatal("a not back in the index with new tasks")
	}
	tys, err := queue.ServeTypes("y")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "p", Worker: "w2", N: 10, Types: tys})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != y {
		t.Fatalf("the type-y claimer took %v, want %s only", got, y)
	}
	if n := e.s.Client().ZCard(e.ctx, pre+"fq:p:2:a").Val(); n != 2 {
		t.Errorf("a's set after the filtered claim holds %d, want the 2 passed over", n)
	}
	if m, _ := mask("a"); m != "2" {
		t.Errorf("a's mask %q after the filtered claim, want 2", m)
	}
	rest := e.claim("p", 10)
	if got := tenants(rest); got["a"] != 2 || got["b"] != 3 {
		t.Errorf("the last claim took %v, want a's 2 of type x and b's last 3", got)
	}
	for _, tk := range rest {
		if tk.Tenant == "a" && tk.ID != x[0] && tk.ID != x[1] {
			t.Errorf("a's task %s claimed, want only %v", tk.ID, x)
		}
	}
	if ks := e.keys(pre + "fq:*"); len(ks) != 0 {
		t.Errorf("tenant sets left after every task was claimed: %v", ks)
	}
}

// A claim is never short while work it may take waits (a short claim
// sends the worker to wait for a wake-up). a floods, b has one task, then one more
// every few claims, and a floor of 8 it cannot use: every claim of 32 takes
// 32 (b's every task and the rest of b's share to a, in the same claim), with completes interleaved as
// a worker's are. The same drain without a fair share takes as many claims.
func TestFairShareClaimsFullWhileWorkWaits(t *testing.T) {
	for _, on := range []bool{false, true} {
		e := newEnv(t, oneShard)
		if on {
			e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}, "b": {Weight: 1, Floor: 8}}}})
		}
		e.submitMany("p", "a", 1200)
		e.submitMany("p", "b", 1)
		var held [][]*task.Task
		got := map[string]int{}
		claims, sentB := 0, 1
		for ready := 1201; ready >= 32; {
			if claims%4 == 0 {
				e.submitMany("p", "b", 1)
				ready++
				sentB++
			}
			ts := e.claim("p", 32)
			claims++
			if len(ts) != 32 {
				t.Fatalf("fair share %v: claim %d took %d (%v) with %d ready, want 32", on, claims, len(ts), tenants(ts), ready)
			}
			for tn, k := range tenants(ts) {
				got[tn] += k
			}
			ready -= len(ts)
			held = append(held, ts)
			if len(held) > 4 {
				e.complete(held[0]...)
				held = held[1:]
			}
		}
		if claims != 37 || got["a"]+got["b"] != 32*37 || (on && got["b"] != sentB) {
			t.Errorf("fair share %v: %d claims took %v, want 37 full ones (with b's %d when on)", on, claims, got, sentB)
		}
	}
}

// The tenant sets are exact (lib.lua fair_drop): a pool whose fair share
// began under exact removals is marked so, and its claims take heads as
// read. Stale entries written by hand stand for a server of an older ax
// that removed lazily during an upgrade: an exact pool's claim then takes
// none of them (the ready-set removal counts short, the records say why),
// returns the live ones and checks from then on; a pool not marked exact
// checks every head it reads, stays full, and is marked once its index
// empties.
func TestFairShareExactSets(t *testing.T) {
	stale := func(e *env, ids ...string) {
		t.Helper()
		pre := e.s.Prefix(0)
		for _, id := range ids {
			// the entry an older ax left: the task's old score in a's set of priority 1
			if err := e.s.Client().ZAdd(e.ctx, pre+"fq:p:1:a", redis.Z{Score: 1, Member: id}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	marked := func(e *env) bool {
		v, _ := e.s.Client().HGet(e.ctx, e.s.Prefix(0)+"fr:p", "!").Result()
		return v == "1"
	}
	setup := func() (*env, []string) {
		e := newEnv(t, oneShard)
		e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}, "b": {Weight: 1}}}})
		if !marked(e) {
			t.Fatal("a new fair share's sets are not marked exact")
		}
		var a []string
		for range 4 {
			a = append(a, e.submit("p", tenantOf("a"), prio(1)))
		}
		e.submitMany("p", "b", 4, prio(1))
		if _, err := e.s.Cancel(e.ctx, a[0], "test", "t"); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SetPriority(e.ctx, a[1], 3, "t"); err != nil {
			t.Fatal(err)
		}
		stale(e, a[0], a[1])
		return e, a
	}
	ids := func(ts []*task.Task) map[string]bool {
		m := map[string]bool{}
		for _, tk := range ts {
			m[tk.ID] = true
		}
		return m
	}

	// Exact: a's share of 4 reads a0 (cancelled), a1 (now priority 3), a2, a3.
	e, a := setup()
	ts := e.claim("p", 8)
	got := ids(ts)
	if len(ts) != 6 || got[a[0]] || got[a[1]] || !got[a[2]] || !got[a[3]] {
		t.Fatalf("exact pool with stale entries: claimed %v (%d), want a2 a3 and b's 4", tenants(ts), len(ts))
	}
	if marked(e) {
		t.Error("a claim that met stale entries left the sets marked exact")
	}
	if c, err := e.s.Counts(e.ctx); err != nil || c.FairStale != 1 {
		t.Errorf("counts: fair stale %v (%v), want 1", c, err)
	}
	next := e.claim("p", 8)
	if len(next) != 1 || next[0].ID != a[1] {
		t.Fatalf("after it: claimed %v, want only a1 (priority 3)", ids(next))
	}
	if fr, _ := e.s.FairRunning(e.ctx, "p"); fr["a"] != 3000 || fr["b"] != 4000 {
		t.Errorf("running counts %v, want a 3, b 4", fr)
	}

	// Not marked (an older ax's sets): the claim checks, and is full.
	e, a = setup()
	if err := e.s.Client().HDel(e.ctx, e.s.Prefix(0)+"fr:p", "!").Err(); err != nil {
		t.Fatal(err)
	}
	ts = e.claim("p", 7)
	if got = ids(ts); len(ts) != 7 || got[a[0]] || !got[a[1]] || !got[a[2]] || !got[a[3]] {
		t.Fatalf("unmarked pool: claimed %v (%d), want a1 a2 a3 and b's 4", tenants(ts), len(ts))
	}
	if marked(e) {
		t.Error("marked exact before its index emptied")
	}
	if ts = e.claim("p", 8); len(ts) != 0 {
		t.Fatalf("claimed %d more, want none", len(ts))
	}
	if !marked(e) {
		t.Error("an empty index did not mark the sets exact")
	}

	// A drain and a re-placement take the task out of its tenant's set too.
	e = newEnv(t, oneShard)
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}}}})
	d := e.submit("p", tenantOf("a"), prio(1))
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(tenantOf("a"), prio(1)), Pool: "p"}) // placed, not pinned
	if err != nil || res[0].Err != nil {
		t.Fatalf("submit: %v %v", err, res)
	}
	r := res[0].ID
	if err := e.s.Fence(e.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.Drain(e.ctx, []queue.DrainMove{{ID: d, Region: "us-east", Pool: "cpu"}}); err != nil || n != 1 {
		t.Fatalf("drain: %d %v", n, err)
	}
	if n, err := e.s.Replace(e.ctx, leader, "p", "test", []string{r}); err != nil || n != 1 {
		t.Fatalf("replace: %d %v", n, err)
	}
	if n, _ := e.s.Client().ZCard(e.ctx, e.s.Prefix(0)+"fq:p:1:a").Result(); n != 0 {
		t.Errorf("a drained and a re-placed task left %d entries in the tenant set", n)
	}
}

// A max or floor smaller than the shard count (a max of 1, a floor of 2 on
// 3 shards) holds for the region: each part adds up to it whenever shares
// are written, the tenant never runs more than its max, and the parts
// follow its tasks over the shards, so all of them run.
func TestFairShareBelowShardsMoves(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	pools := map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Max: 1, Floor: 2}, "b": {Weight: 1}}}}
	if !e.s.FairShareMoves(pools) {
		t.Error("a max of 1 on 3 shards: FairShareMoves false, want true")
	}
	if e.s.FairShareMoves(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 3}}}}) {
		t.Error("weights alone on 3 shards: FairShareMoves true, want false (nothing to move)")
	}
	e.setFair(pools)
	total := e.submitOnEveryShard("p", tenantOf("a"))
	e.submitMany("p", "b", 6)
	parts := func() (floor, mx int) {
		for i := range e.s.Shards() {
			v, _ := e.s.Client().HGet(e.ctx, e.s.Prefix(i)+"fs:p", "a").Result()
			var w, fl int
			fmt.Sscanf(v, "%d %d", &w, &fl)
			floor += fl
			mx += queue.MovedPart(v)
		}
		return floor, mx
	}
	if fl, mx := parts(); fl != 2 || mx != 1 {
		t.Fatalf("the shards' parts add up to floor %d, max %d; want 2, 1", fl, mx)
	}
	var running []*task.Task
	done, peak := 0, 0
	for round := 0; done < total && round < 4*total; round++ {
		running = append(running, e.claimOf("p", 40, "a")...)
		if len(running) > 1 {
			t.Fatalf("round %d: a runs %d, its max is 1", round, len(running))
		}
		peak = max(peak, len(running))
		if len(running) > 0 {
			e.complete(running[0])
			running = running[1:]
			done++
		}
		e.clock.Advance(time.Second)
		e.setFair(pools)
		if fl, mx := parts(); fl != 2 || mx != 1 {
			t.Fatalf("round %d: the shards' parts add up to floor %d, max %d; want 2, 1", round, fl, mx)
		}
	}
	if done != total {
		t.Fatalf("%d of a's %d tasks ran", done, total)
	}
	if peak != 1 {
		t.Errorf("a ran at most %d at once, want its max of 1", peak)
	}
}

// handedOff submits n tasks of pool (mod) with the ids another region gave
// them on its shard from, as a hand-off keeps them: on 3 shards they all
// land on shard from % 3 (a one-shard region's hand-offs: shard 0).
func (e *env) handedOff(pool string, from, n int, mod ...func(*task.Spec)) []string {
	e.t.Helper()
	ids := make([]string, n)
	ts := make([]queue.NewTask, n)
	gen := task.NewIDGen()
	for i := range ts {
		ids[i] = gen.New("us-west-2", from, e.clock.Now())
		ts[i] = queue.NewTask{Spec: e.spec(mod...), Pool: pool, Pinned: true, ID: ids[i]}
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
	return ids
}

// fairParts sums the shards' parts of tenant tn's floor and max in pool.
func (e *env) fairParts(pool, tn string) (floor, mx int) {
	e.t.Helper()
	for i := range e.s.Shards() {
		v, _ := e.s.Client().HGet(e.ctx, e.s.Prefix(i)+"fs:"+pool, tn).Result()
		var w, fl int
		fmt.Sscanf(v, "%d %d", &w, &fl)
		floor += fl
		mx += queue.MovedPart(v)
	}
	return floor, mx
}

// A floor of 4 on 3 shards whose tenant's work is all on one shard (handed
// off from a one-shard region) while another tenant, weighted 100, floods
// every shard and holds every slot: each leader round moves the floor's
// parts to that shard, so the tenant runs 4 within two rounds of six freed
// slots (claims start on each shard in turn) and keeps them; the parts add
// up to 4 after every round.
func TestFairShareFloorFollowsWorkOverShards(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	pools := map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Floor: 4}, "b": {Weight: 100}}}}
	e.setFair(pools)
	e.submitMany("p", "b", 300)
	running := e.claim("p", 12)
	if len(running) != 12 {
		t.Fatalf("b claimed %d, want 12", len(running))
	}
	e.handedOff("p", 0, 20, tenantOf("a"))
	for round := 1; round <= 4; round++ {
		e.clock.Advance(time.Second)
		e.setFair(pools)
		if fl, _ := e.fairParts("p", "a"); fl != 4 {
			t.Fatalf("round %d: a's floor parts add up to %d, want 4", round, fl)
		}
		for range 6 { // six slots free one at a time, each claimed at once
			for i, tk := range running {
				if tk.Tenant == "b" {
					e.complete(tk)
					running = slices.Delete(running, i, i+1)
					break
				}
			}
			running = append(running, e.claim("p", 1)...)
		}
		if a := tenants(running)["a"]; round >= 2 && a != 4 {
			t.Errorf("round %d: a runs %d of the 12 slots, want its floor of 4", round, a)
		}
	}
	if len(running) != 12 {
		t.Errorf("%d running, want the 12 slots full", len(running))
	}
}

// A max of 6 on 3 shards whose tenant's work is all on one shard: the
// tenant reaches 6 running, never 7, while the parts move (taken away
// before given), they add up to 6 after every round, and when its work
// moves to another shard the parts follow: 6 run there, never 7 in all.
func TestFairShareMaxFollowsWorkOverShards(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	pools := map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Max: 6}}}}
	e.setFair(pools)
	e.submitMany("p", "b", 60) // b's, on every shard, run at once
	first := e.handedOff("p", 0, 18, tenantOf("a"))
	var second []string
	onSecond := map[string]bool{}
	var running []*task.Task
	done, peak, peakSecond := 0, 0, 0
	for round := 0; done < 42 && round < 80; round++ {
		e.clock.Advance(time.Second)
		e.setFair(pools)
		if _, mx := e.fairParts("p", "a"); mx != 6 {
			t.Fatalf("round %d: a's max parts add up to %d, want 6", round, mx)
		}
		running = append(running, e.claimOf("p", 40, "a")...)
		if len(running) > 6 {
			t.Fatalf("round %d: a runs %d, its max is 6", round, len(running))
		}
		peak = max(peak, len(running))
		n := 0
		for _, tk := range running {
			if onSecond[tk.ID] {
				n++
			}
		}
		peakSecond = max(peakSecond, n)
		if round == 1 && peak != 6 {
			t.Errorf("after 2 rounds a ran at most %d at once with 18 waiting, want its max of 6", peak)
		}
		if second == nil && len(running) == 6 {
			// its work moves: the rest of a's tasks arrive on shard 1
			second = e.handedOff("p", 1, 24, tenantOf("a"))
			for _, id := range second {
				onSecond[id] = true
			}
		}
		k := min(2, len(running))
		e.complete(running[:k]...)
		running, done = running[k:], done+k
	}
	if done != len(first)+len(second) {
		t.Fatalf("%d of a's %d tasks ran", done, len(first)+len(second))
	}
	if peak != 6 || peakSecond != 6 {
		t.Errorf("a ran at most %d at once (%d of its tasks on shard 1), want its max of 6 (6)", peak, peakSecond)
	}
}

// With several shards the leader writes a shard's fair shares only when
// they would change: a shard that lost its keys (a Redis restarted empty)
// has them back at the next round, and a pool whose fair share goes loses
// its keys though the other pools' parts are unchanged.
func TestFairShareWritesWhatChanged(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	both := map[string]queue.FairShare{
		"p": {Tenants: map[string]queue.TenantShare{"a": {Floor: 2, Max: 4}}},
		"q": {Tenants: map[string]queue.TenantShare{"a": {Max: 3}}},
	}
	e.setFair(both)
	e.submitMany("p", "a", 6)
	e.setFair(both)
	held := func(key string) []int {
		var n []int
		for i := range e.s.Shards() {
			c, err := e.rdb.HLen(e.ctx, e.s.Prefix(i)+key).Result()
			if err != nil {
				t.Fatal(err)
			}
			n = append(n, int(c))
		}
		return n
	}
	if got := held("fs:q"); !slices.Equal(got, []int{2, 2, 2}) {
		t.Fatalf("fs:q fields by shard %v, want 2 each ('*' and a)", got)
	}
	if err := e.rdb.Del(e.ctx, e.s.Prefix(1)+"fs:p").Err(); err != nil {
		t.Fatal(err)
	}
	e.setFair(both)
	if got := held("fs:p"); !slices.Equal(got, []int{2, 2, 2}) {
		t.Errorf("after shard 1 lost fs:p, a round left fields %v, want 2 on each shard", got)
	}
	if fl, mx := e.fairParts("p", "a"); fl != 2 || mx != 4 {
		t.Errorf("a's parts in p add up to floor %d, max %d; want 2, 4", fl, mx)
	}
	e.setFair(map[string]queue.FairShare{"p": both["p"]})
	if got := held("fs:q"); !slices.Equal(got, []int{0, 0, 0}) {
		t.Errorf("pool q's fair share gone: fs:q fields by shard %v, want none", got)
	}
}

// floorSim runs a pool of 4 slots held by 2 workers of 2 slots (each with
// a store of its own, as worker processes have), tenant a (weight 1000)
// flooding every shard, b (floor 2) with 12 tasks on shard 0 (hand-offs),
// every task running exactly 300 ms on the fake clock, so tasks claimed
// together end together. At each instant each worker whose tasks end
// claims its freed slots at once (one by one: a claim of 1 each, as when
// they free a moment apart), recording the completions first (ackFirst,
// as package worker does) or after the claim (as it did: the claim still
// counted the ended tasks as running); the leader's round runs every
// second. It counts the bursts (a worker's claims of the slots freed at
// one instant), from b's first leader round on, after which b runs fewer
// than min(2, its work), and b's running after each.
func floorSim(t *testing.T, shards int, ackFirst, oneByOne bool) (short, claims int, trace []int) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = shards })
	pools := map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1000}, "b": {Floor: 2}}}}
	e.setFair(pools)
	e.submitMany("p", "a", 300)
	stores := make([]*stageSet, 2)
	for i := range stores {
		s, err := newStages(e.rdb, e.s.Options())
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	type run struct {
		tk  *task.Task
		end time.Time
	}
	held := make([][]run, len(stores))
	complete := func(w int, ts []*task.Task) {
		cs := make([]queue.Completion, len(ts))
		for i, tk := range ts {
			cs[i] = queue.Completion{ID: tk.ID, Token: tk.LeaseToken}
		}
		errs, err := stores[w].Complete(e.ctx, cs...)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	claim := func(w, n int) {
		c, err := stores[w].ClaimTasks(e.ctx, queue.ClaimRequest{Pool: "p", Worker: fmt.Sprint("w", w), N: n})
		if err != nil {
			t.Fatal(err)
		}
		if !c.Counts {
			t.Fatal("a claim of a pool with a fair share: Counts false, want true (the worker records its successes first)")
		}
		for _, tk := range c.Tasks {
			held[w] = append(held[w], run{tk, e.clock.Now().Add(300 * time.Millisecond)})
		}
	}
	for w := range stores {
		claim(w, 2)
	}
	e.clock.Advance(100 * time.Millisecond)
	const bTasks = 12
	if shards == 1 {
		e.submitMany("p", "b", bTasks)
	} else {
		e.handedOff("p", 0, bTasks, tenantOf("b"))
	}
	bStarted, bDone := 0, 0
	lastRound := e.clock.Now()
	counting := false
	for step := 0; bDone < bTasks && step < 400; step++ {
		next := time.Time{}
		for _, rs := range held {
			for _, r := range rs {
				if next.IsZero() || r.end.Before(next) {
					next = r.end
				}
			}
		}
		e.clock.Advance(next.Sub(e.clock.Now()))
		if e.clock.Now().Sub(lastRound) >= time.Second {
			e.setFair(pools)
			lastRound, counting = e.clock.Now(), true
		}
		for w := range stores {
			var ended []*task.Task
			keep := held[w][:0]
			for _, r := range held[w] {
				if r.end.Equal(next) {
					ended = append(ended, r.tk)
				} else {
					keep = append(keep, r)
				}
			}
			held[w] = keep
			if len(ended) == 0 {
				continue
			}
			for _, tk := range ended {
				if tk.Tenant == "b" {
					bDone++
				}
			}
			if ackFirst {
				complete(w, ended)
			}
			sizes := []int{len(ended)}
			if oneByOne {
				sizes = slices.Repeat([]int{1}, len(ended))
			}
			for k, size := range sizes {
				before := len(held[w])
				claim(w, size)
				for _, r := range held[w][before:] {
					if r.tk.Tenant == "b" {
						bStarted++
					}
				}
				if !ackFirst && k == len(sizes)-1 {
					complete(w, ended)
				}
			}
			bRun := 0
			for _, rs := range held {
				for _, r := range rs {
					if r.tk.Tenant == "b" {
						bRun++
					}
				}
			}
			if counting {
				claims++
				trace = append(trace, bRun)
				if bRun < min(2, bTasks-bStarted+bRun) {
					short++
				}
			}
		}
	}
	if bDone != bTasks {
		t.Fatalf("%d of b's %d tasks ran", bDone, bTasks)
	}
	return short, claims, trace
}

// A floor of 2 behind a flood, tasks of equal length ending together and
// their slots claimed at once or one by one: with the completions recorded
// before the claims of the slots they freed (package worker's order) b
// runs 2 after every burst of claims while it has 2 tasks left, on one shard and on
// 3 (the claims start on the shard where the completion left a floor
// owed, as many as it owes); with the completions recorded after, b's
// ended task still counted and its slot went to a (the e2e's 1 at once).
func TestFairShareFloorHoldsWhenTasksEndTogether(t *testing.T) {
	for _, shards := range []int{1, 3} {
		for _, oneByOne := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d shards, one by one %v", shards, oneByOne), func(t *testing.T) {
				short, claims, trace := floorSim(t, shards, true, oneByOne)
				t.Logf("completions first: %d of %d bursts of claims left b short of its floor; b running after each: %v", short, claims, trace)
				if short != 0 || claims == 0 {
					t.Errorf("completions first: %d of %d bursts of claims left b short of its floor of 2 with its tasks waiting", short, claims)
				}
				short, claims, trace = floorSim(t, shards, false, oneByOne)
				t.Logf("completions after the claims: %d of %d bursts left b short; b running after each: %v", short, claims, trace)
			})
		}
	}
}

// Claimed.Counts tells a claimer whether the pool has a fair share
// (package worker then records its successes before it claims), on every
// shard (a floor's part may be on another than the one claimed from).
func TestFairShareClaimCounts(t *testing.T) {
	e := newEnv(t)
	e.submitMany("p", "a", 8)
	counts := func() bool {
		t.Helper()
		c, err := e.s.ClaimTasks(e.ctx, queue.ClaimRequest{Pool: "p", Worker: "w1", N: 1})
		if err != nil || len(c.Tasks) != 1 {
			t.Fatalf("claim: %d tasks, %v", len(c.Tasks), err)
		}
		return c.Counts
	}
	if counts() {
		t.Error("no fair share: Counts true, want false")
	}
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 3, Max: 6}}}})
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"b": {Floor: 1}}}})
	for range 3 { // each claim starts on the next shard
		if !counts() {
			t.Error("a fair share: Counts false, want true")
		}
	}
}

// claimOf claims up to n tasks of pool and returns tenant's; the others'
// complete at once.
func (e *env) claimOf(pool string, n int, tenant string) []*task.Task {
	e.t.Helper()
	var mine []*task.Task
	for _, tk := range e.claim(pool, n) {
		if tk.Tenant == tenant {
			mine = append(mine, tk)
		} else {
			e.complete(tk)
		}
	}
	return mine
}

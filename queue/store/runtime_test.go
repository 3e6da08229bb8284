package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

func typ(name string) func(*task.Spec) { return func(s *task.Spec) { s.Type = name } }

// runFor claims every task of pool, lets d pass, and completes them in one
// call.
func (e *env) runFor(pool string, d time.Duration) {
	e.t.Helper()
	ts := e.claim(pool, queue.MaxBatch)
	e.clock.Advance(d)
	e.complete(ts...)
}

func (e *env) runTimes() map[string]queue.RunTime {
	e.t.Helper()
	rts, err := e.s.RunTimes(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]queue.RunTime{}
	for _, r := range rts {
		k := r.Pool + " " + r.Type
		if r.Tenant != "default" {
			k += " " + r.Tenant
		}
		m[k] = r
	}
	return m
}

// Completions feed their (pool, type) pair: a plain mean and standard
// deviation for the first 1/alpha, then a moving average; one batch of
// mixed pairs folds into each.
func TestRunTimesAfterCompletes(t *testing.T) {
	// The spreads below are one shard's (the script's µs steps); merged
	// over shards they differ in the last digits (TestRunTimesAcrossShards).
	e := newEnv(t, oneShard)
	start := e.clock.Now()
	// 100, 200, 300 ms of "resize" in cpu, one at a time.
	for _, ms := range []int{100, 200, 300} {
		e.submit("cpu", typ("resize"))
		e.runFor("cpu", time.Duration(ms)*time.Millisecond)
	}
	// One batch: 2 of "resize" in gpu and 1 of "encode" in cpu, 50 ms.
	e.submit("gpu", typ("resize"))
	e.submit("gpu", typ("resize"))
	e.submit("cpu", typ("encode"))
	gpu := e.claim("gpu", 10)
	cpu := e.claim("cpu", 10)
	e.clock.Advance(50 * time.Millisecond)
	var cs []queue.Completion
	for _, tk := range append(gpu, cpu...) {
		cs = append(cs, queue.Completion{ID: tk.ID, Token: tk.LeaseToken})
	}
	if _, err := e.s.Complete(e.ctx, cs...); err != nil {
		t.Fatal(err)
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// Population standard deviation of 100, 200, 300 ms: 81.650 ms.
	want := map[string]queue.RunTime{
		"cpu resize": {Pool: "cpu", Type: "resize", Tenant: "default", Count: 3, Mean: ms(200), Spread: 81650 * time.Microsecond,
			Last: start.Add(ms(600))},
		"gpu resize": {Pool: "gpu", Type: "resize", Tenant: "default", Count: 2, Mean: ms(50), Last: start.Add(ms(650))},
		"cpu encode": {Pool: "cpu", Type: "encode", Tenant: "default", Count: 1, Mean: ms(50), Last: start.Add(ms(650))},
	}
	if d := cmp.Diff(want, e.runTimes()); d != "" {
		t.Fatalf("run times (-want +got):\n%s", d)
	}

	// Past 1/alpha observations a new one weighs alpha (0.2): ten at
	// 100 ms bring resize's mean near 100 ms, and one at 1 100 ms then
	// moves it by a fifth of the difference only.
	for range 10 {
		e.submit("cpu", typ("resize"))
		e.runFor("cpu", ms(100))
	}
	before := e.runTimes()["cpu resize"].Mean
	e.submit("cpu", typ("resize"))
	e.runFor("cpu", ms(1100))
	after := e.runTimes()["cpu resize"]
	wantMean := before + (ms(1100)-before)/5
	if d := after.Mean - wantMean; d < -time.Microsecond || d > time.Microsecond || after.Count != 14 {
		t.Fatalf("after an outlier: mean %v count %d, want %v (1 µs rounding) and 14", after.Mean, after.Count, wantMean)
	}
}

// Run times are learnt per tenant: another tenant's runs of a type of the
// same name in the same pool (completed in the same batch, or ran into
// their deadline) leave a tenant's figures as they were.
func TestRunTimesPerTenant(t *testing.T) {
	e := newEnv(t, oneShard)
	for range 3 {
		e.submit("cpu", typ("resize"), tenant("acme"))
		e.runFor("cpu", 100*time.Millisecond)
	}
	before := e.runTimes()["cpu resize acme"]
	// One batch mixing both tenants: globex's runs are 50x slower.
	e.submit("cpu", typ("resize"), tenant("acme"))
	e.submit("cpu", typ("resize"), tenant("globex"))
	e.submit("cpu", typ("resize"), tenant("globex"))
	acme, globex := e.claim("cpu", 10), []*task.Task(nil)
	e.clock.Advance(100 * time.Millisecond)
	var cs []queue.Completion
	for _, tk := range acme {
		if tk.Tenant == "globex" {
			globex = append(globex, tk)
			continue
		}
		cs = append(cs, queue.Completion{ID: tk.ID, Token: tk.LeaseToken})
	}
	if _, err := e.s.Complete(e.ctx, cs...); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(4900 * time.Millisecond)
	cs = []queue.Completion{{ID: globex[0].ID, Token: globex[0].LeaseToken}}
	if _, err := e.s.Complete(e.ctx, cs...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: globex[1].ID, Token: globex[1].LeaseToken, Error: "deadline",
		Retryable: true, Reason: task.ReasonDeadline}); err != nil {
		t.Fatal(err)
	}
	got := e.runTimes()
	a, g := got["cpu resize acme"], got["cpu resize globex"]
	if a.Count != before.Count+1 || a.Mean != 100*time.Millisecond || a.Tenant != "acme" {
		t.Errorf("acme's run time moved by globex's runs: %+v (before %+v)", a, before)
	}
	if g.Count != 2 || g.Mean != 5*time.Second || g.Tenant != "globex" {
		t.Errorf("globex: %+v, want 2 observations of 5s", g)
	}
	if len(got) != 2 {
		t.Errorf("run times %v, want one per tenant", got)
	}
}

// Only an attempt that ran into its deadline counts among failures: a
// handler error or a cancel says nothing of how long the work takes.
func TestRunTimesFromFailures(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu", typ("crash"), retries(0))
	tk := e.claimOne("cpu")
	e.clock.Advance(5 * time.Millisecond)
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	id = e.submit("cpu", typ("slow"), retries(0))
	tk = e.claimOne("cpu")
	e.clock.Advance(30 * time.Second)
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "deadline", Retryable: true,
		Reason: task.ReasonDeadline}); err != nil {
		t.Fatal(err)
	}
	got := e.runTimes()
	if _, ok := got["cpu crash"]; ok {
		t.Errorf("a handler error was counted: %+v", got["cpu crash"])
	}
	if r := got["cpu slow"]; r.Count != 1 || r.Mean != 30*time.Second {
		t.Errorf("deadline exceeded: %+v, want 1 observation of 30s", r)
	}
}

// A flood of new type names cannot grow a shard's hash past its cap, nor
// a tenant's triples past its share (a quarter of the cap): a hostile
// tenant completing many one-off types, each more often than another
// tenant's real types, neither keeps a third tenant's new type out nor
// makes the leader's trim push the real types out; the trim keeps the
// types that carry the work and takes from the tenants holding the most.
func TestRunTimesBounded(t *testing.T) {
	const pairs, share = 16, 4
	if maint.TenantRunTimePairs(pairs) != share {
		t.Fatalf("a tenant's share of %d: %d, want %d", pairs, maint.TenantRunTimePairs(pairs), share)
	}
	e := newEnv(t, oneShard, func(o *queue.Options) { o.RunTimePairs = pairs }) // a shard's cap
	// Tenant good's two real types, each with 5 completions.
	for range 5 {
		e.submit("cpu", typ("resize"), tenantOf("good"))
		e.submit("cpu", typ("encode"), tenantOf("good"))
		e.runFor("cpu", 10*time.Millisecond)
	}
	// Tenant evil completes 20 one-off types, 8 times each.
	for range 8 {
		for i := range 20 {
			e.submit("cpu", typ(fmt.Sprintf("junk-%d", i)), tenantOf("evil"))
		}
		e.runFor("cpu", time.Millisecond)
	}
	rt := queue.RunTimesKey(e.s.Prefix(0))
	held := func() map[string]int {
		m := map[string]int{}
		for f := range e.rdb.HGetAll(e.ctx, rt).Val() {
			m[f[strings.LastIndexByte(f, ' ')+1:]]++
		}
		return m
	}
	if d := cmp.Diff(map[string]int{"good": 2, "evil": share}, held()); d != "" {
		t.Fatalf("triples by tenant (-want +got):\n%s", d)
	}
	// Tenant late's new type still finds room; evil's fifth does not.
	e.submit("cpu", typ("newcomer"), tenantOf("late"))
	e.submit("cpu", typ("junk-99"), tenantOf("evil"))
	e.submit("cpu", typ("resize"), tenantOf("good"))
	e.runFor("cpu", 10*time.Millisecond)
	got := e.runTimes()
	if _, ok := got["cpu newcomer late"]; !ok {
		t.Errorf("late's new type was dropped: %v", got)
	}
	if _, ok := got["cpu junk-99 evil"]; ok {
		t.Errorf("evil's fifth type was kept past its share of %d", share)
	}
	if got["cpu resize good"].Count != 6 || got["cpu encode good"].Count != 5 {
		t.Fatalf("real types: %v", got)
	}
	// The leader trims to half (8), each tenant to half its share (2),
	// from the tenants holding the most, least used first: good keeps
	// both real types though evil's junk ran more often.
	if _, err := e.s.TrimRunTimes(e.ctx, queue.Fence{Name: leader.Name, Token: leader.Token}); err != nil {
		t.Fatal(err)
	}
	got = e.runTimes()
	if len(got) > pairs/2 || got["cpu resize good"].Count != 6 || got["cpu encode good"].Count != 5 {
		t.Fatalf("after trim: %d triples %v, want at most %d with good's resize and encode", len(got), got, pairs/2)
	}
	if h := held(); h["evil"] > share/2 {
		t.Errorf("after trim evil holds %d triples, want at most %d", h["evil"], share/2)
	}
	tenants := map[string]string{}
	for k, v := range e.rdb.HGetAll(e.ctx, queue.RunTimeTenantsKey(e.s.Prefix(0))).Val() {
		tenants[k] = v
	}
	want := map[string]string{}
	for k, v := range held() {
		want[k] = fmt.Sprint(v)
	}
	if d := cmp.Diff(want, tenants); d != "" {
		t.Errorf("tenants' counts after trim (-want +got):\n%s", d)
	}
	// Under 3/4 of the cap and of every share nothing is trimmed.
	if n, err := e.s.TrimRunTimes(e.ctx, leader); err != nil || n != 0 {
		t.Fatalf("trim of a small hash: %d %v", n, err)
	}
	// Ten more tenants of one-off types each: the hash stops at its cap;
	// a stale leader's trim is fenced.
	for i := range 10 {
		for j := range 3 {
			e.submit("cpu", typ(fmt.Sprintf("t%d-%d", i, j)), tenantOf(fmt.Sprintf("t%d", i)))
		}
	}
	e.runFor("cpu", time.Millisecond)
	if n := e.rdb.HLen(e.ctx, rt).Val(); n != pairs {
		t.Fatalf("hash holds %d triples, want the cap %d", n, pairs)
	}
	if _, err := e.s.TrimRunTimes(e.ctx, queue.Fence{Name: leader.Name, Token: leader.Token - 1}); err != queue.ErrFenced {
		t.Fatalf("trim by an old leader: %v, want ErrFenced", err)
	}

}

// Shards merge: counts add up, means weigh by count.
func TestRunTimesAcrossShards(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 2 })
	seen := map[int]bool{}
	for len(seen) < 2 {
		id := e.submit("cpu", typ("resize"))
		shard, _ := e.s.ShardOf(id)
		seen[shard] = true
	}
	ts := e.claim("cpu", 10)
	e.clock.Advance(100 * time.Millisecond)
	var cs []queue.Completion
	for _, tk := range ts {
		cs = append(cs, queue.Completion{ID: tk.ID, Token: tk.LeaseToken})
	}
	if _, err := e.s.Complete(e.ctx, cs...); err != nil {
		t.Fatal(err)
	}
	for sh := range 2 {
		if e.rdb.HLen(e.ctx, queue.RunTimesKey(e.s.Prefix(sh))).Val() != 1 {
			t.Fatalf("shard %d has no run time", sh)
		}
	}
	r := e.runTimes()["cpu resize"]
	if r.Count != int64(len(ts)) || r.Mean != 100*time.Millisecond || r.Spread != 0 {
		t.Fatalf("merged: %+v, want %d at 100ms", r, len(ts))
	}
}

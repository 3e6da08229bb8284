package store_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

func limitKeyOf(k string) func(*task.Spec) { return func(s *task.Spec) { s.LimitKey = k } }

func typeOf(ty string) func(*task.Spec) { return func(s *task.Spec) { s.Type = ty } }

func (e *env) setLimits(ls ...queue.Limit) {
	e.t.Helper()
	if err := e.s.SetLimits(e.ctx, leader, ls); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) limitState(kind, name string) queue.LimitState {
	e.t.Helper()
	st, err := e.s.LimitStatus(e.ctx, kind, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// reasons counts the trail steps of id by reason.
func (e *env) reasons(id string) map[string]int {
	e.t.Helper()
	tr, err := e.s.Trail(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]int{}
	for _, s := range tr {
		if !task.Legal(s.From, s.To, s.Reason) {
			e.t.Errorf("%s: illegal step %s→%s %s", id, s.From, s.To, s.Reason)
		}
		m[s.Reason]++
	}
	return m
}

func ids(ts []*task.Task) map[string]bool {
	m := map[string]bool{}
	for _, t := range ts {
		m[t.ID] = true
	}
	return m
}

// A rate-limited key at the head of a pool is parked aside: the unlimited
// tasks behind it are claimed in the same claim, the limited ones wait
// READY (no attempt spent, one RATE_LIMITED step however many claims find
// them), and come back in order as tokens do.
func TestRateLimitParksAndReleases(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setLimits(queue.Limit{Kind: queue.LimitKey, Name: "stripe", Rate: 10, Burst: 2})
	var limited, free []string
	for i := 0; i < 5; i++ {
		limited = append(limited, e.submit("p", limitKeyOf("stripe")))
	}
	for i := 0; i < 3; i++ {
		free = append(free, e.submit("p"))
	}
	c, err := e.s.ClaimTasks(e.ctx, queue.ClaimRequest{Pool: "p", Worker: "w1", N: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := ids(c.Tasks)
	if len(c.Tasks) != 5 || !got[limited[0]] || !got[limited[1]] {
		t.Fatalf("claimed %d (%v), want the burst of 2 and the 3 unlimited", len(c.Tasks), got)
	}
	for _, id := range free {
		if !got[id] {
			t.Errorf("unlimited task %s behind the limited ones was not claimed", id)
		}
	}
	if c.Parked <= 0 || c.Parked > 100*time.Millisecond {
		t.Errorf("Parked = %v, want the next token within 100ms", c.Parked)
	}
	if st := e.limitState(queue.LimitKey, "stripe"); st.Parked != 3 {
		t.Errorf("parked %d, want 3", st.Parked)
	}
	// Claims that find no token change nothing and log nothing more.
	for i := 0; i < 3; i++ {
		if ts := e.claim("p", 10); len(ts) != 0 {
			t.Fatalf("claimed %d without a token", len(ts))
		}
	}
	for _, id := range limited[2:] {
		tk, _ := e.s.Get(e.ctx, id)
		if tk.State != task.Ready || tk.Attempts != 0 {
			t.Errorf("%s: %s attempts %d, want READY 0", id, tk.State, tk.Attempts)
		}
		if n := e.reasons(id)[task.ReasonRateLimited]; n != 1 {
			t.Errorf("%s: %d RATE_LIMITED steps, want 1", id, n)
		}
	}
	if ls, _, err := e.s.List(e.ctx, queue.ListQuery{State: task.Ready, Pool: "p", Limit: 10}); err != nil || len(ls) != 3 {
		t.Errorf("List READY: %d tasks %v, want the 3 parked", len(ls), err)
	}
	cn, _ := e.s.Counts(e.ctx)
	if cn.ParkedBy["p"] != 3 || cn.LimitedBy["p"]["rate"] != 3 || cn.ReadyIn("p") != 3 {
		t.Errorf("counts parked %v limited %v ready %d", cn.ParkedBy, cn.LimitedBy, cn.ReadyIn("p"))
	}
	// 100ms: one token, the oldest parked task.
	e.clock.Advance(100 * time.Millisecond)
	if ts := e.claim("p", 10); len(ts) != 1 || ts[0].ID != limited[2] {
		t.Fatalf("after one token: %v, want %s", ids(ts), limited[2])
	}
	e.clock.Advance(time.Second)
	ts := e.claim("p", 10)
	if len(ts) != 2 || ts[0].ID != limited[3] || ts[1].ID != limited[4] {
		t.Fatalf("after the burst refilled: %v", ids(ts))
	}
	if st := e.limitState(queue.LimitKey, "stripe"); st.Parked != 0 {
		t.Errorf("parked %d after release, want 0", st.Parked)
	}
	cn, _ = e.s.Counts(e.ctx)
	if cn.ParkedBy["p"] != 0 {
		t.Errorf("parked gauge %d, want 0", cn.ParkedBy["p"])
	}
}

// A concurrency limit holds over claims and is given back on every way out
// of RUNNING: complete, fail, return, and the reaper's lease expiry (a
// crashed worker), each unparking a waiting task.
func TestConcurrencyLimitSlotsComeBack(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setLimits(queue.Limit{Kind: queue.LimitType, Name: "t.c", Concurrency: 2})
	var all []string
	for i := 0; i < 6; i++ {
		all = append(all, e.submit("p", typeOf("t.c")))
	}
	ts := e.claim("p", 10)
	if len(ts) != 2 {
		t.Fatalf("claimed %d, want 2", len(ts))
	}
	if st := e.limitState(queue.LimitType, "t.c"); st.Running != 2 || st.Parked != 4 {
		t.Fatalf("state %+v, want 2 running 4 parked", st)
	}
	if n := e.reasons(all[2])[task.ReasonConcurrencyLimited]; n != 1 {
		t.Errorf("%d CONCURRENCY_LIMITED steps, want 1", n)
	}
	// complete → one slot, one task unparked.
	if _, err := e.s.Complete(e.ctx, queue.Completion{ID: ts[0].ID, Token: ts[0].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	next := e.claim("p", 10)
	if len(next) != 1 || next[0].ID != all[2] {
		t.Fatalf("after complete: %v, want %s", ids(next), all[2])
	}
	// fail → retry backoff (PENDING), slot back.
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: ts[1].ID, Token: ts[1].LeaseToken, Error: "x", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.claim("p", 10); len(got) != 1 {
		t.Fatalf("after fail: claimed %d, want 1", len(got))
	} else {
		next = append(next, got...)
	}
	// A worker that dies: its leases expire, the reaper frees the slots.
	e.clock.Advance(time.Minute)
	if n, _, err := e.s.Reap(e.ctx, leader, 100); err != nil || n != 2 {
		t.Fatalf("reap: %d %v", n, err)
	}
	if st := e.limitState(queue.LimitType, "t.c"); st.Running != 0 {
		t.Fatalf("running %d after the reap, want 0", st.Running)
	}
	got := e.claim("p", 10)
	if len(got) != 2 {
		t.Fatalf("after the reap: claimed %d, want 2", len(got))
	}
	// return (shutdown) gives the slot back too.
	if _, err := e.s.Return(e.ctx, got[0].ID, got[0].LeaseToken, task.ReasonWorkerShutdown, 0); err != nil {
		t.Fatal(err)
	}
	if st := e.limitState(queue.LimitType, "t.c"); st.Running != 1 {
		t.Fatalf("running %d after a return, want 1", st.Running)
	}
	// A parked task canceled leaves its parked set.
	before := e.limitState(queue.LimitType, "t.c").Parked
	var parkedID string
	for _, id := range all {
		if tk, _ := e.s.Get(e.ctx, id); tk.State == task.Ready && e.reasons(id)[task.ReasonConcurrencyLimited] > 0 {
			parkedID = id
		}
	}
	if parkedID != "" {
		if _, err := e.s.Cancel(e.ctx, parkedID, "", "test"); err != nil {
			t.Fatal(err)
		}
		if after := e.limitState(queue.LimitType, "t.c").Parked; after >= before && before > 0 {
			t.Errorf("parked %d → %d after a cancel", before, after)
		}
	}
}

// A handler's retry after pauses its limit key for every claimer: the task
// goes back READY without spending its attempt, other tasks of the key
// wait (RETRY_AFTER), tasks of other keys and types do not, and all run
// once the pause is over.
func TestRetryAfterPausesTheKey(t *testing.T) {
	e := newEnv(t, oneShard)
	a := e.submit("p", limitKeyOf("acme"))
	tk := e.claimOne("p")
	st, err := e.s.RetryAfter(e.ctx, tk.ID, tk.LeaseToken, 2*time.Second)
	if err != nil || st != task.Ready {
		t.Fatalf("retry after: %s %v", st, err)
	}
	b := e.submit("p", limitKeyOf("acme"))
	other := e.submit("p", limitKeyOf("other"))
	plain := e.submit("p")
	// Another tenant's task of the same key: a tenant pauses only its own.
	theirs := e.submit("p", limitKeyOf("acme"), func(s *task.Spec) { s.Tenant = "globex" })
	got := ids(e.claim("p", 10))
	if len(got) != 3 || !got[other] || !got[plain] || !got[theirs] {
		t.Fatalf("while paused claimed %v, want only %s, %s and %s", got, other, plain, theirs)
	}
	ps, err := e.s.PauseStatus(e.ctx, "default", "acme", "")
	if err != nil || ps.Parked != 2 || ps.PausedUntil.IsZero() {
		t.Fatalf("acme's pause %+v %v, want 2 parked and a pause", ps, err)
	}
	e.clock.Advance(1900 * time.Millisecond)
	if n := len(e.claim("p", 10)); n != 0 {
		t.Fatalf("claimed %d before the pause ended", n)
	}
	e.clock.Advance(200 * time.Millisecond)
	ts := e.claim("p", 10)
	if len(ts) != 2 || ts[0].ID != a || ts[1].ID != b {
		t.Fatalf("after the pause: %v, want %s then %s", ids(ts), a, b)
	}
	if ts[0].Attempts != 1 {
		t.Errorf("attempts %d after a retry after, want 1 (none spent)", ts[0].Attempts)
	}
	if r := e.reasons(a); r[task.ReasonRetryAfter] != 1 {
		t.Errorf("trail of %s: %v, want one RETRY_AFTER", a, r)
	}
	if r := e.reasons(b); r[task.ReasonRetryAfter] != 1 {
		t.Errorf("trail of %s: %v, want one RETRY_AFTER", b, r)
	}
}

// A key that is no longer limited releases what it parked.
func TestRemovedLimitReleases(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setLimits(queue.Limit{Kind: queue.LimitTenant, Name: "default", Rate: 1, Burst: 1})
	for i := 0; i < 4; i++ {
		e.submit("p")
	}
	if n := len(e.claim("p", 10)); n != 1 {
		t.Fatalf("claimed %d, want 1", n)
	}
	e.setLimits()
	if n := len(e.claim("p", 10)); n != 3 {
		t.Fatalf("claimed %d after the limit went, want 3", n)
	}
}

// Over three shards (three masters of a Cluster in cluster mode), each
// shard enforces its part: a concurrency of 4 is 2, 1 and 1, and the
// region's total holds.
func TestLimitSplitsOverShards(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	e.setLimits(queue.Limit{Kind: queue.LimitTenant, Name: "default", Concurrency: 4})
	for shard := 0; shard < 3; shard++ {
		for i := 0; i < 5; i++ {
			e.submitOn(shard, "p")
		}
	}
	var got []*task.Task
	for i := 0; i < 3; i++ { // a claim visits the shards round-robin
		got = append(got, e.claim("p", 10)...)
	}
	per := map[int]int{}
	for _, tk := range got {
		sh, _ := e.s.ShardOf(tk.ID)
		per[sh]++
	}
	if len(got) != 4 || per[0] != 2 || per[1] != 1 || per[2] != 1 {
		t.Fatalf("claimed %d, per shard %v: want 4 (2, 1, 1)", len(got), per)
	}
	if st := e.limitState(queue.LimitTenant, "default"); st.Running != 4 || st.Parked != 11 {
		t.Errorf("state %+v, want 4 running, 11 parked", st)
	}
}

// A parked task's priority can change: it stays parked and comes back
// under its new priority (the priority script read a missing ready-set
// score for it before).
func TestPriorityOfAParkedTask(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setLimits(queue.Limit{Kind: queue.LimitType, Name: "t.c", Concurrency: 1})
	first := e.submit("p", typeOf("t.c"))
	parked := e.submit("p", typeOf("t.c"))
	ts := e.claim("p", 10)
	if len(ts) != 1 || ts[0].ID != first {
		t.Fatalf("claimed %v, want %s", ids(ts), first)
	}
	if err := e.s.SetPriority(e.ctx, parked, 1, "op"); err != nil {
		t.Fatalf("priority of a parked task: %v", err)
	}
	c, err := e.s.Counts(e.ctx)
	if err != nil || c.ReadyBy["p"][1] != 1 || c.ReadyBy["p"][task.DefaultPriority] != 0 {
		t.Fatalf("counts after the change: %+v %v", c.ReadyBy, err)
	}
	if _, err := e.s.Complete(e.ctx, queue.Completion{ID: ts[0].ID, Token: ts[0].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	next := e.claim("p", 10)
	if len(next) != 1 || next[0].ID != parked || next[0].Priority != 1 {
		t.Fatalf("after the slot came back: %+v, want %s at priority 1", next, parked)
	}
}

// A concurrency limit smaller than the shard count (1 and 2 on 3 shards)
// holds for the region, not per shard: its parts add up to it whenever
// limits are written, never more than it runs at once, and they follow
// the tasks as they wait on the shards, so every task runs.
func TestConcurrencyBelowShardsMoves(t *testing.T) {
	for _, limit := range []int{1, 2} {
		e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
		ls := []queue.Limit{{Kind: queue.LimitKey, Name: "deploy", Concurrency: limit}, {Kind: queue.LimitKey, Name: "wide", Concurrency: 3}}
		if !e.s.LimitsMove(ls) || !e.s.LimitsMove(ls[1:]) {
			t.Errorf("concurrencies of %d and 3 on 3 shards: LimitsMove false, want true (every part moves)", limit)
		}
		e.setLimits(ls...)
		total := e.submitOnEveryShard("p", limitKeyOf("deploy"))
		parts := func() int {
			sum := 0
			for i := range e.s.Shards() {
				v, _ := e.rdb.HGet(e.ctx, e.s.Prefix(i)+"lim", "k:deploy").Result()
				sum += queue.MovedPart(v)
			}
			return sum
		}
		if p := parts(); p != limit {
			t.Fatalf("limit %d: the shards' parts add up to %d", limit, p)
		}
		var running []*task.Task
		done, peak := 0, 0
		for round := 0; done < total && round < 4*total; round++ {
			running = append(running, e.claim("p", 10)...)
			if len(running) > limit {
				t.Fatalf("limit %d, round %d: %d tasks of the key running", limit, round, len(running))
			}
			if st := e.limitState(queue.LimitKey, "deploy"); st.Running != len(running) || st.Running+st.Parked != total-done {
				t.Fatalf("limit %d, round %d: %+v, want %d running, %d parked", limit, round, st, len(running), total-done-len(running))
			}
			peak = max(peak, len(running))
			if len(running) > 0 {
				e.complete(running[0])
				running = running[1:]
				done++
			}
			e.clock.Advance(1100 * time.Millisecond) // parked tasks are looked at again
			e.setLimits(ls...)
			if p := parts(); p != limit {
				t.Fatalf("limit %d, round %d: the shards' parts add up to %d", limit, round, p)
			}
		}
		if done != total {
			t.Fatalf("limit %d: %d of %d tasks ran", limit, done, total)
		}
		if peak != limit {
			t.Errorf("at most %d tasks ran at once, want the limit's %d", peak, limit)
		}
	}
}

// submitOnWith accepts one task of spec mod into pool on shard, as a task
// handed off from a region of another shard count lands on the shard its
// id names.
func (e *env) submitOnWith(shard int, pool string, mod ...func(*task.Spec)) string {
	e.t.Helper()
	id := e.s.NewID(shard, e.clock.Now())
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(mod...), Pool: pool, Pinned: true, ID: id})
	if err != nil || res[0].Err != nil {
		e.t.Fatalf("submit: %v %v", err, res)
	}
	return id
}

// limitParts reads every shard's part of a limit key and what it runs.
func (e *env) limitParts(key string) []queue.SharePart {
	e.t.Helper()
	out := make([]queue.SharePart, e.s.Shards())
	for i := range e.s.Shards() {
		p := e.s.Prefix(i)
		v, err := e.rdb.HGet(e.ctx, p+"lim", key).Result()
		if err != nil {
			e.t.Fatalf("shard %d: no part of %s: %v", i, key, err)
		}
		out[i] = queue.ParsePart(v)
		n, _ := e.rdb.HGet(e.ctx, p+"lc", key).Int()
		out[i].Running = n
	}
	return out
}

// checkParts fails the test unless the shards' parts of key add up to l:
// the rate (milli-tasks/s) and burst exactly, the concurrency counting a
// shard's tasks running past a part just lowered.
func (e *env) checkParts(key string, l queue.Limit, when string) []queue.SharePart {
	e.t.Helper()
	ps := e.limitParts(key)
	var rate int64
	burst, conc := 0, 0
	for _, p := range ps {
		rate += p.Rate
		burst += p.Burst
		conc += max(p.Conc, p.Running)
		if (p.Rate > 0) != (p.Burst > 0) {
			e.t.Errorf("%s: %s: a shard's part %+v has a rate without a burst or a burst without a rate", when, key, p)
		}
	}
	wr, wb := queue.LimitFigures(l)
	if l.Rate > 0 && (rate != wr || burst != wb) {
		e.t.Errorf("%s: %s: rate parts add up to %d, bursts to %d, want %d and %d (%+v)", when, key, rate, burst, wr, wb, ps)
	}
	if l.Concurrency > 0 && conc != l.Concurrency {
		e.t.Errorf("%s: %s: concurrency parts add up to %d, want %d (%+v)", when, key, conc, l.Concurrency, ps)
	}
	return ps
}

// A concurrency of 5 over 3 shards with all of the key's work on one shard
// (tasks handed off from a region of one shard all land on shard 0) runs 5
// at once there, never 6; when the work moves to another shard the parts
// follow it, and they add up to 5 after every round.
func TestConcurrencyFollowsTheWork(t *testing.T) {
	if one := newEnv(t, oneShard); one.s.LimitsMove([]queue.Limit{{Kind: queue.LimitKey, Name: "api", Concurrency: 5}}) {
		t.Error("one shard: LimitsMove true, want false (its parts are the figures)")
	}
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	l := queue.Limit{Kind: queue.LimitKey, Name: "api", Concurrency: 5}
	e.setLimits(l)
	for _, shard := range []int{0, 2} {
		total := 12
		for range total {
			e.submitOnWith(shard, "p", limitKeyOf("api"))
		}
		var running []*task.Task
		peak, done := 0, 0
		for round := 0; done < total && round < 10*total; round++ {
			running = append(running, e.claim("p", 10)...)
			if len(running) > 5 {
				t.Fatalf("work on shard %d, round %d: %d running, want at most 5", shard, round, len(running))
			}
			for _, tk := range running {
				if sh, _ := e.s.ShardOf(tk.ID); sh != shard {
					t.Fatalf("claimed a task of shard %d, want only shard %d's", sh, shard)
				}
			}
			peak = max(peak, len(running))
			if round%2 == 1 && len(running) > 0 { // two claims a round: the parts first
				e.complete(running[0])
				running, done = running[1:], done+1
			}
			e.clock.Advance(500 * time.Millisecond)
			e.setLimits(l)
			e.checkParts("k:api", l, "after a round")
		}
		if done != total || peak != 5 {
			t.Errorf("work on shard %d: %d of %d ran, at most %d at once, want all and 5", shard, done, total, peak)
		}
		if p := e.limitParts("k:api"); p[shard].Conc != 5 {
			t.Errorf("work on shard %d: its part is %d, want all 5 (%+v)", shard, p[shard].Conc, p)
		}
	}
}

// A rate of 10/s over 3 shards with all of the key's work on one shard
// starts 10 a second there (one every 100 ms), not a third of it; the
// starts are counted on the store's clock.
func TestRateFollowsTheWork(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	l := queue.Limit{Kind: queue.LimitKey, Name: "api", Rate: 10, Burst: 2}
	e.setLimits(l)
	for range 300 {
		e.submitOnWith(1, "p", limitKeyOf("api"))
	}
	started := 0
	step := 20 * time.Millisecond
	for i := range 600 { // 12 s; the leader's round every second
		if i == 100 {
			started = 0 // the window: seconds 2 to 12
		}
		ts := e.claim("p", 10)
		started += len(ts)
		e.complete(ts...)
		e.clock.Advance(step)
		if i%50 == 49 {
			e.setLimits(l)
			e.checkParts("k:api", l, "after a round")
		}
	}
	// 10 s at 10/s: 100, and at most the burst more.
	if started < 98 || started > 102 {
		t.Errorf("started %d in 10 s at 10/s with the work on one shard, want 100 (98-102)", started)
	}
}

// A burst of 1 over 3 shards never starts 2 at once, wherever the work is;
// the starts of a rate of 1/s with a burst of 1 are at least a second apart.
func TestBurstBelowShards(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	l := queue.Limit{Kind: queue.LimitKey, Name: "one", Rate: 1, Burst: 1}
	e.setLimits(l)
	for i := range 30 {
		e.submitOnWith(i%3, "p", limitKeyOf("one"))
	}
	var last time.Time
	started := 0
	for i := range 200 { // 20 s
		ts := e.claim("p", 10)
		if len(ts) > 1 {
			t.Fatalf("step %d: %d started at once, want at most 1", i, len(ts))
		}
		if len(ts) == 1 {
			if now := e.clock.Now(); !last.IsZero() && now.Sub(last) < time.Second {
				t.Fatalf("step %d: two starts %v apart at 1/s with a burst of 1", i, now.Sub(last))
			}
			last = e.clock.Now()
			started++
			e.complete(ts...)
		}
		e.clock.Advance(100 * time.Millisecond)
		if i%10 == 9 {
			e.setLimits(l)
			e.checkParts("k:one", l, "after a round")
		}
	}
	if started < 15 {
		t.Errorf("started %d in 20 s at 1/s, want about 20", started)
	}
}

// The parts of every figure add up to it after every round, wherever the
// work is, for figures smaller than the shard count too: a rate of 0.001/s
// is 1 milli-task/s over the region, not 1 on each shard.
func TestLimitPartsAddUp(t *testing.T) {
	ls := []queue.Limit{
		{Kind: queue.LimitKey, Name: "a", Rate: 50, Burst: 5, Concurrency: 5},
		{Kind: queue.LimitKey, Name: "b", Rate: 0.001},
		{Kind: queue.LimitKey, Name: "c", Rate: 0.5, Concurrency: 2},
		{Kind: queue.LimitKey, Name: "d", Concurrency: 7},
		{Kind: queue.LimitTenant, Name: "default", Rate: 100, Burst: 2},
	}
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	e.setLimits(ls...)
	for round := range 12 {
		for _, l := range ls {
			k, _ := queue.KeyOfLimit(l.Kind, l.Name)
			e.checkParts(k, l, "round "+strconv.Itoa(round))
		}
		for _, l := range ls[:4] { // work here and there
			e.submitOnWith((round*7+len(l.Name))%3, "p", limitKeyOf(l.Name))
		}
		ts := e.claim("p", 3)
		if round%3 == 2 {
			e.complete(ts...)
		}
		e.clock.Advance(time.Second)
		e.setLimits(ls...)
	}
}

// BenchmarkLeaderRoundKeys times the leader's round of limits (SetLimits)
// with 1000 limit keys over 3 shards, 100 of them with work waiting on one
// shard each: per round, its time, and the Redis commands it sends and
// their time in Redis (SLOWLOG). One script call a shard reads the work of
// every key, not one call a key.
func BenchmarkLeaderRoundKeys(b *testing.B) {
	r := testenv.StartRedis(b)
	rdb := r.Client()
	ctx := context.Background()
	clock := newFakeClock()
	s, err := newStages(rdb, queue.Options{Region: "bench", Shards: 3, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	var ls []queue.Limit
	for j := range 1000 {
		l := queue.Limit{Kind: queue.LimitKey, Name: fmt.Sprintf("key-%04d", j)}
		switch j % 3 {
		case 0:
			l.Rate, l.Burst, l.Concurrency = 10, 5, 5
		case 1:
			l.Concurrency = 4
		case 2:
			l.Rate = 2.5
		}
		ls = append(ls, l)
	}
	f := queue.Fence{Name: "region", Token: 1}
	if err := s.SetLimits(ctx, f, ls); err != nil {
		b.Fatal(err)
	}
	var batch []queue.NewTask
	for j := range 100 {
		for range 10 {
			sp := &task.Spec{Type: "bench.noop", Payload: []byte(`{}`), LimitKey: ls[j].Name}
			if err := sp.Normalize(task.DefaultDefaults(), clock.Now()); err != nil {
				b.Fatal(err)
			}
			batch = append(batch, queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true, ID: s.NewID(j%3, clock.Now())})
		}
	}
	if _, err := s.Submit(ctx, batch...); err != nil {
		b.Fatal(err)
	}
	for range 100 { // park what the parts leave waiting
		if got, err := s.Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 64}); err != nil || len(got) == 0 {
			break
		}
	}
	// Redis' own count: scripts called (one round trip each) and the time
	// they took, and every command they ran.
	stats := func() (calls, usec, inner int64) {
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			var c, u int64
			if _, err := fmt.Sscanf(rest, "calls=%d,usec=%d", &c, &u); err != nil {
				continue
			}
			switch name {
			case "cmdstat_fcall", "cmdstat_evalsha":
				calls, usec = calls+c, usec+u
			case "cmdstat_info":
			default:
				inner += c
			}
		}
		return calls, usec, inner
	}
	// steady: the parts stay; changing: every figure changes every round
	// (its parts are lowered on some shards, then raised on others).
	other := slices.Clone(ls)
	for j := range other {
		other[j].Rate, other[j].Concurrency = other[j].Rate*2, other[j].Concurrency*2
	}
	for _, arm := range []struct {
		name string
		alt  []queue.Limit
	}{{"steady", ls}, {"changing", other}} {
		b.Run(arm.name, func(b *testing.B) {
			c0, u0, i0 := stats()
			b.ResetTimer()
			for i := range b.N {
				clock.Advance(time.Second)
				l := ls
				if i%2 == 1 {
					l = arm.alt
				}
				if err := s.SetLimits(ctx, f, l); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			c1, u1, i1 := stats()
			n := float64(b.N)
			b.ReportMetric(float64(c1-c0)/n, "scripts/round")
			b.ReportMetric(float64(u1-u0)/n/1000, "redis-ms/round")
			b.ReportMetric(float64(i1-i0)/n, "commands/round")
		})
	}
}

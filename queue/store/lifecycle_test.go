package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

func TestHappyPathAndTrail(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu")
	if st := e.state(id); st != task.Ready {
		t.Fatalf("after submit: %s", st)
	}
	e.clock.Advance(time.Second)
	tk := e.claimOne("cpu")
	if tk.ID != id || tk.State != task.Running || tk.Attempts != 1 || tk.LeaseToken == "" {
		t.Fatalf("claimed: %+v", tk)
	}
	if string(tk.Payload) != `{"n":1}` {
		t.Fatalf("payload %s", tk.Payload)
	}
	e.clock.Advance(time.Second)
	errs, err := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: tk.LeaseToken, Result: "ok"})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	got, _ := e.s.Get(e.ctx, id)
	if got.State != task.Success || got.Result != "ok" {
		t.Fatalf("after complete: %+v", got)
	}
	tr, err := e.s.Trail(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []task.State{task.Ready, task.Running, task.Success}
	if len(tr) != len(want) {
		t.Fatalf("trail %+v", tr)
	}
	for i, w := range want {
		if tr[i].To != w {
			t.Fatalf("trail[%d] = %+v, want to %s", i, tr[i], w)
		}
	}
	c, _ := e.s.Counts(e.ctx)
	if c.Ready != 0 || c.Running != 0 || c.Succeeded != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestRetryThenDeadThenReplay(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu", retries(1))
	tk := e.claimOne("cpu")
	st, due, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "boom", Retryable: true})
	if err != nil || st != task.Pending {
		t.Fatalf("fail 1: %s %v", st, err)
	}
	if d := due.Sub(e.clock.Now()); d < 300*time.Millisecond || d > 375*time.Millisecond {
		t.Fatalf("backoff %v, want 300ms + ≤25%%", d)
	}
	e.clock.Advance(time.Second)
	if _, err := e.s.Promote(e.ctx, leader, 100); err != nil {
		t.Fatal(err)
	}
	tk = e.claimOne("cpu")
	if tk.Attempts != 2 {
		t.Fatalf("attempts %d", tk.Attempts)
	}
	st, _, err = e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "boom again", Retryable: true})
	if err != nil || st != task.Failed {
		t.Fatalf("fail 2: %s %v", st, err)
	}
	dead, _ := e.s.DeadLetters(e.ctx, 0, 10)
	if len(dead) != 1 || dead[0].LastError != "boom again" || dead[0].Reason != task.ReasonRetriesExhausted {
		t.Fatalf("dead letters %+v", dead)
	}
	if err := e.s.Replay(e.ctx, id, "op"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Promote(e.ctx, leader, 100); err != nil {
		t.Fatal(err)
	}
	tk = e.claimOne("cpu")
	if tk.Attempts != 1 {
		t.Fatalf("replayed attempts %d", tk.Attempts)
	}
	tr, _ := e.s.Trail(e.ctx, id)
	var reasons []string
	for _, x := range tr {
		reasons = append(reasons, x.Reason)
	}
	t.Logf("trail reasons %v", reasons)
	if !contains(reasons, task.ReasonHandlerError) || !contains(reasons, task.ReasonRetriesExhausted) || !contains(reasons, task.ReasonReplayed) {
		t.Fatalf("trail misses steps: %v", reasons)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestLeaseLossReapedAndRetried(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu")
	first := e.claimOne("cpu")
	// Heartbeats stop; the lease (10s) expires.
	e.clock.Advance(11 * time.Second)
	n, _, err := e.s.Reap(e.ctx, leader, 100)
	if err != nil || n != 1 {
		t.Fatalf("reap: %d %v", n, err)
	}
	if st := e.state(id); st != task.Pending {
		t.Fatalf("after reap: %s", st)
	}
	e.clock.Advance(time.Minute)
	if _, err := e.s.Promote(e.ctx, leader, 100); err != nil {
		t.Fatal(err)
	}
	second, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w2", N: 1})
	if err != nil || len(second) != 1 {
		t.Fatal(err)
	}
	// The first claimant's late complete is rejected; its heartbeat reports the lost token.
	errs, _ := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: first.LeaseToken})
	if !errors.Is(errs[0], queue.ErrLeaseLost) {
		t.Fatalf("late complete: %v", errs[0])
	}
	stops, err := e.s.Heartbeat(e.ctx, "w1", "cpu", 4, queue.Types{}, []queue.Lease{{ID: id, Token: first.LeaseToken}})
	if err != nil || len(stops) != 1 || stops[0].Why != queue.StopLost {
		t.Fatalf("heartbeat: %v %v", stops, err)
	}
	errs, _ = e.s.Complete(e.ctx, queue.Completion{ID: id, Token: second[0].LeaseToken})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	tr, _ := e.s.Trail(e.ctx, id)
	var sawTimeout bool
	for _, x := range tr {
		if x.To == task.Timeout && x.Reason == task.ReasonHeartbeatLost {
			sawTimeout = true
		}
	}
	if !sawTimeout || e.state(id) != task.Success {
		t.Fatalf("trail %+v", tr)
	}
}

func TestFencing(t *testing.T) {
	e := newEnv(t)
	e.submit("", delay(time.Second))
	if _, err := e.s.Promote(e.ctx, queue.Fence{Name: "region", Token: 7}, 10); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	_, err := e.s.Promote(e.ctx, queue.Fence{Name: "region", Token: 6}, 10)
	if !errors.Is(err, queue.ErrFenced) {
		t.Fatalf("token 6 after 7: %v", err)
	}
	c, _ := e.s.Counts(e.ctx)
	due, _ := e.s.DueTasks(e.ctx, 10)
	if c.Pending != 1 || len(due) != 0 {
		t.Fatalf("a fenced promote changed something: %+v due=%d", c, len(due))
	}
	res, err := e.s.Promote(e.ctx, queue.Fence{Name: "region", Token: 8}, 10)
	if err != nil || res.Moved != 1 {
		t.Fatalf("token 8: %+v %v", res, err)
	}
}

// A leader loop's drain is fenced (an operator's is not): a deposed
// leader's re-placement moves nothing.
func TestDrainFencing(t *testing.T) {
	e := newEnv(t)
	a, b := e.submit("cpu"), e.submit("cpu")
	if _, err := e.s.Promote(e.ctx, queue.Fence{Name: "region", Token: 7}, 10); err != nil {
		t.Fatal(err)
	}
	n, err := e.s.Drain(e.ctx, []queue.DrainMove{{ID: a, Region: "us-east", Pool: "cpu"}}, queue.Fence{Name: "region", Token: 6})
	if !errors.Is(err, queue.ErrFenced) || n != 0 {
		t.Fatalf("token 6 after 7: %d %v", n, err)
	}
	if st := e.state(a); st != task.Ready {
		t.Fatalf("a fenced drain moved the task: %s", st)
	}
	if n, err = e.s.Drain(e.ctx, []queue.DrainMove{{ID: a, Region: "us-east", Pool: "cpu"}}, queue.Fence{Name: "region", Token: 7}); err != nil || n != 1 {
		t.Fatalf("token 7: %d %v", n, err)
	}
	if n, err = e.s.Drain(e.ctx, []queue.DrainMove{{ID: b, Region: "us-east", Pool: "cpu"}}); err != nil || n != 1 {
		t.Fatalf("operator drain: %d %v", n, err)
	}
	for _, id := range []string{a, b} {
		if tk, _ := e.s.Get(e.ctx, id); tk.State != task.Pending || tk.HandOffTarget != "us-east" {
			t.Fatalf("%s: %s target %q", id, tk.State, tk.HandOffTarget)
		}
	}
}

// An attempt that ran past its deadline keeps DEADLINE_EXCEEDED in the trail
// when it retries and when it ends FAILED, through TIMEOUT as a reaped one.
func TestDeadlineFailureThroughTimeout(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu", retries(1))
	for attempt, want := range []task.State{task.Pending, task.Failed} {
		if attempt == 1 {
			e.clock.Advance(time.Minute)
			if _, err := e.s.Promote(e.ctx, leader, 10); err != nil {
				t.Fatal(err)
			}
		}
		tk := e.claimOne("cpu")
		st, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "ran past its deadline", Retryable: true, Reason: task.ReasonDeadline})
		if err != nil || st != want {
			t.Fatalf("attempt %d: %s %v, want %s", attempt+1, st, err, want)
		}
	}
	tr, err := e.s.Trail(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, x := range tr {
		if !task.Legal(x.From, x.To, x.Reason) {
			t.Fatalf("illegal step %+v", x)
		}
		steps = append(steps, fmt.Sprintf("%s>%s %s", x.From, x.To, x.Reason))
	}
	want := "[>READY PLACED READY>RUNNING CLAIMED RUNNING>TIMEOUT DEADLINE_EXCEEDED TIMEOUT>PENDING DEADLINE_EXCEEDED " +
		"PENDING>READY DUE READY>RUNNING CLAIMED RUNNING>TIMEOUT DEADLINE_EXCEEDED TIMEOUT>FAILED RETRIES_EXHAUSTED]"
	if fmt.Sprint(steps) != want {
		t.Fatalf("trail\n %v\nwant\n %s", steps, want)
	}
}

// A task handed off and later handed back (a drain of the other region)
// replaces its HANDED_OFF record here: it is live again, not "already
// there" — which would leave both regions forwarding to each other.
func TestHandedBackReplacesForwardingRecord(t *testing.T) {
	e := newEnv(t)
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(), Pool: "cpu", HandOff: "us-east"})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	id := res[0].ID
	if err := e.s.HandOffDone(e.ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if st := e.state(id); st != task.HandedOff {
		t.Fatalf("after hand-off: %s", st)
	}
	// The same id arriving without the flag (a schedule slot, a DAG node)
	// is a duplicate and changes nothing.
	again, err := e.s.Submit(e.ctx, queue.NewTask{ID: id, Spec: e.spec(), Pool: "cpu"})
	if err != nil || !errors.Is(again[0].Err, task.ErrExists) || again[0].State != task.HandedOff {
		t.Fatalf("plain resubmit: %+v %v", again, err)
	}
	back, err := e.s.Submit(e.ctx, queue.NewTask{ID: id, Spec: e.spec(), Pool: "gpu", Returning: true})
	if err != nil || back[0].Err != nil || back[0].State != task.Ready {
		t.Fatalf("handed back: %+v %v", back, err)
	}
	tk, err := e.s.Get(e.ctx, id)
	if err != nil || tk.State != task.Ready || tk.Pool != "gpu" || tk.HandedOffTo != "" {
		t.Fatalf("record after coming back: %+v %v", tk, err)
	}
	if ttl := e.rdb.PTTL(e.ctx, e.s.Prefix(0)+"l:"+id).Val(); ttl >= 0 {
		t.Fatalf("trail list still expires in %v", ttl)
	}
	tr, _ := e.s.Trail(e.ctx, id)
	var steps []string
	for _, x := range tr {
		if !task.Legal(x.From, x.To, x.Reason) {
			t.Fatalf("illegal step %+v", x)
		}
		steps = append(steps, fmt.Sprintf("%s>%s %s", x.From, x.To, x.Reason))
	}
	if !strings.Contains(fmt.Sprint(steps), "PENDING>HANDED_OFF HANDED_OFF") || !strings.HasSuffix(fmt.Sprint(steps), ">READY PLACED]") {
		t.Fatalf("trail %v: want the hand-off, then the return", steps)
	}
	ts := e.claim("gpu", 5)
	if len(ts) != 1 || ts[0].ID != id {
		t.Fatalf("claimed %v", ts)
	}
	if c, _ := e.s.Counts(e.ctx); c.Running != 1 || c.Pending != 0 || c.Ready != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// A generated id that is already taken (another process generated the same
// millisecond and sequence) is replaced, and the task is accepted: a fresh
// submit never fails with ErrExists.
func TestGeneratedIDCollisionGetsANewID(t *testing.T) {
	const seq = 12345
	e := newEnv(t, func(o *queue.Options) { o.IDs = task.NewIDGenAt(seq) })
	next := task.FormatID("eu-west", 0, e.clock.Now().UnixMilli(), seq+1)
	// Another process stored a task under exactly that id.
	if err := e.rdb.HSet(e.ctx, e.s.Prefix(0)+"t:"+next, "st", "R", "ty", "other").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(), Pool: "cpu"})
	if err != nil || res[0].Err != nil || res[0].ID == next || res[0].State != task.Ready {
		t.Fatalf("submit: %+v %v; want a new id, READY", res, err)
	}
	if tk, _ := e.s.Get(e.ctx, next); tk.Type != "other" {
		t.Fatalf("the other process's task was touched: %+v", tk)
	}
}

// Place decides each due task once, even when a batch names it twice.
func TestPlaceTwiceInOneBatchPlacesOnce(t *testing.T) {
	e := newEnv(t)
	id := e.submit("")
	res, err := e.s.Place(e.ctx, leader, []queue.Assignment{{ID: id, Pool: "cpu"}, {ID: id, Pool: "gpu"}})
	if err != nil || res.Placed != 1 || res.Skipped != 1 {
		t.Fatalf("place: %+v %v", res, err)
	}
	if c, _ := e.s.Counts(e.ctx); c.Ready != 1 || c.Pending != 0 || c.ReadyBy["cpu"][2] != 1 {
		t.Fatalf("counts %+v", c)
	}
}

// Dead letters of several shards come back as one list, newest first, and
// pages of it neither repeat nor skip an entry.
func TestDeadLettersAcrossShardsNewestFirst(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	const n = 30
	for i := 0; i < n; i++ {
		id := e.submit("cpu", retries(0))
		tk := e.claimOne("cpu")
		if tk.ID != id {
			t.Fatalf("claimed %s, want %s", tk.ID, id)
		}
		if st, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "boom", Retryable: true}); err != nil || st != task.Failed {
			t.Fatalf("fail: %s %v", st, err)
		}
		e.clock.Advance(time.Millisecond)
	}
	var all []*task.Task
	for off := 0; ; off += 7 {
		page, err := e.s.DeadLetters(e.ctx, off, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 7 {
			t.Fatalf("page of %d, want at most 7", len(page))
		}
		all = append(all, page...)
	}
	if len(all) != n {
		t.Fatalf("%d dead letters over the pages, want %d", len(all), n)
	}
	seen := map[string]bool{}
	for i, tk := range all {
		if seen[tk.ID] {
			t.Fatalf("%s twice", tk.ID)
		}
		seen[tk.ID] = true
		if i > 0 && tk.FinishedAt.After(*all[i-1].FinishedAt) {
			t.Fatalf("entry %d (%v) newer than entry %d (%v)", i, tk.FinishedAt, i-1, all[i-1].FinishedAt)
		}
	}
}

// TestSuccessRetention: a SUCCESS record and its trail stay for the
// retention of successes and are deleted by the leader's sweep once the
// minute they finished in is older than that (lib.lua retain_success),
// one batch of at most limit a call per shard, Left while more are due;
// records never carry a TTL of their own while a sweeper is alive.
func TestSuccessRetention(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.RetainSuccess = time.Hour })
	leader := queue.Fence{Name: "leader", Token: 1}
	sweep := func(limit int) queue.Swept {
		t.Helper()
		r, err := e.s.Sweep(e.ctx, leader, limit)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	sweep(1) // the leader's sweeper is alive
	done := func(ids ...string) {
		t.Helper()
		for range ids {
			tk := e.claimOne("cpu")
			if errs, err := e.s.Complete(e.ctx, queue.Completion{ID: tk.ID, Token: tk.LeaseToken}); err != nil || errs[0] != nil {
				t.Fatal(err, errs)
			}
		}
	}
	// a: with a trail (returned once), b: without; both finish now.
	a := e.submit("cpu")
	tk := e.claimOne("cpu")
	if _, err := e.s.Return(e.ctx, a, tk.LeaseToken, task.ReasonPreempted, 0); err != nil {
		t.Fatal(err)
	}
	b := e.submit("cpu")
	done(a, b)
	e.clock.Advance(30 * time.Minute)
	c := e.submit("cpu")
	done(c)
	for _, id := range []string{a, b, c} {
		if ttl := e.rdb.PTTL(e.ctx, e.shardPrefix(id)+"t:"+id).Val(); ttl != -1 {
			t.Fatalf("%s: record TTL %v, want none", id, ttl)
		}
	}
	if tr, _ := e.s.Trail(e.ctx, a); len(tr) == 0 {
		t.Fatal("no trail for a returned task")
	}
	if r := sweep(1); r != (queue.Swept{}) {
		t.Fatalf("sweep within the retention: %+v", r)
	}
	gone := func(id string) bool {
		_, err := e.s.Get(e.ctx, id)
		return errors.Is(err, task.ErrNotFound)
	}
	if gone(a) || gone(b) || gone(c) {
		t.Fatal("a record went within its retention")
	}
	// Past a's and b's retention (and their minute's end), not c's: a
	// limit of 1 a call takes two calls (one when they are on two shards).
	e.clock.Advance(32 * time.Minute)
	n := 0
	for round := 1; ; round++ {
		r := sweep(1)
		n += r.Successes
		if r.Left && r.Lag <= 0 {
			t.Fatalf("round %d: %+v: successes left without a lag", round, r)
		}
		if !r.Left {
			break
		}
		if round == 2 {
			t.Fatalf("still left after two sweeps of 1: %+v", r)
		}
	}
	if n != 2 {
		t.Fatalf("swept %d, want 2", n)
	}
	if !gone(a) || !gone(b) || gone(c) {
		t.Fatalf("after the sweep: a gone %v, b gone %v, c gone %v", gone(a), gone(b), gone(c))
	}
	if n := e.rdb.Exists(e.ctx, e.shardPrefix(a)+"l:"+a).Val(); n != 0 {
		t.Fatal("a's trail outlived its record")
	}
	e.clock.Advance(30 * time.Minute)
	if r := sweep(10); r.Successes != 1 || r.Left || r.Lag != 0 || !gone(c) {
		t.Fatalf("second sweep: %+v, c gone %v", r, gone(c))
	}
	if k := append(e.keys("ax:*:rs:*"), e.keys("ax:*:rsi")...); len(k) != 0 {
		t.Fatalf("retention keys left: %v", k)
	}
	// A stale leader sweeps nothing.
	if _, err := e.s.Sweep(e.ctx, queue.Fence{Name: "leader", Token: 0}, 10); !errors.Is(err, queue.ErrFenced) {
		t.Fatalf("stale sweep: %v", err)
	}
}

// finish submits, claims and completes n tasks of pool cpu at once.
func (e *env) finish(n int) []string {
	e.t.Helper()
	batch := make([]queue.NewTask, n)
	for i := range batch {
		batch[i] = queue.NewTask{Spec: e.spec(), Pool: "cpu", Pinned: true}
	}
	if _, err := e.s.Submit(e.ctx, batch...); err != nil {
		e.t.Fatal(err)
	}
	ts := e.claim("cpu", n)
	if len(ts) != n {
		e.t.Fatalf("claimed %d, want %d", len(ts), n)
	}
	e.complete(ts...)
	ids := make([]string, n)
	for i, tk := range ts {
		ids[i] = tk.ID
	}
	return ids
}

// TestSuccessSweepBacklog: a backlog of six times one call's limit, over
// five minutes, all past the retention, is swept completely in at most
// 60/10 + 1 rounds of the leader's loop (Left until then, with the lag of
// the oldest minute), and the successes not yet due stay.
func TestSuccessSweepBacklog(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.RetainSuccess = time.Hour })
	leader := queue.Fence{Name: "leader", Token: 1}
	if _, err := e.s.Sweep(e.ctx, leader, 10); err != nil {
		t.Fatal(err)
	}
	var old []string
	for range 5 {
		old = append(old, e.finish(12)...)
		e.clock.Advance(time.Minute)
	}
	e.clock.Advance(61 * time.Minute) // the five minutes are past the retention
	fresh := e.finish(7)
	n, rounds := 0, 0
	for {
		rounds++
		r, err := e.s.Sweep(e.ctx, leader, 10)
		if err != nil {
			t.Fatal(err)
		}
		n += r.Successes
		if rounds == 1 && (!r.Left || r.Lag <= 0 || r.Lag > 6*time.Minute) {
			t.Fatalf("first round: %+v, want some left with a lag of at most 6 min", r)
		}
		if !r.Left {
			if r.Lag != 0 {
				t.Fatalf("caught up with a lag: %+v", r)
			}
			break
		}
		if rounds > 60/10+1 {
			t.Fatalf("%d rounds and still left (%d swept)", rounds, n)
		}
	}
	if n != len(old) {
		t.Fatalf("swept %d, want %d", n, len(old))
	}
	for _, id := range old {
		if _, err := e.s.Get(e.ctx, id); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("%s: %v, want deleted", id, err)
		}
	}
	for _, id := range fresh {
		if tk, err := e.s.Get(e.ctx, id); err != nil || tk.State != task.Success {
			t.Fatalf("%s not yet due: %v %v", id, tk, err)
		}
	}
	left := int64(0)
	for _, k := range e.keys("ax:*:rs:*") {
		left += e.rdb.LLen(e.ctx, k).Val()
	}
	if left != int64(len(fresh)) {
		t.Fatalf("%d ids left in the minute lists, want %d", left, len(fresh))
	}
}

// TestSuccessTTLWithoutSweeper: while no sweep has run within SweepAlive
// (rsw absent: a leader of an older build in a rolling upgrade), a success
// gets a TTL of the retention and goes into no minute list; once a sweep
// ran, none.
func TestSuccessTTLWithoutSweeper(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.RetainSuccess = time.Hour })
	ttl := func(id string) time.Duration {
		return e.rdb.PTTL(e.ctx, e.shardPrefix(id)+"t:"+id).Val()
	}
	a := e.finish(3)
	for _, id := range a {
		if d := ttl(id); d <= 0 || d > time.Hour {
			t.Fatalf("%s without a sweeper: TTL %v, want (0, 1h]", id, d)
		}
	}
	if k := e.keys("ax:*:rs:*"); len(k) != 0 {
		t.Fatalf("minute lists without a sweeper: %v", k)
	}
	if _, err := e.s.Sweep(e.ctx, queue.Fence{Name: "leader", Token: 1}, 10); err != nil {
		t.Fatal(err)
	}
	for _, k := range e.keys("ax:*:rsw") {
		if d := e.rdb.PTTL(e.ctx, k).Val(); d <= 0 || d > queue.SweepAlive {
			t.Fatalf("%s: TTL %v, want (0, %v]", k, d, queue.SweepAlive)
		}
	}
	for _, id := range e.finish(3) {
		if d := ttl(id); d != -1 {
			t.Fatalf("%s with a sweeper: TTL %v, want none", id, d)
		}
	}
}

package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

// costSum merges records by (day, tenant, type, pool, tags): the shards'
// parts of one field.
func costSum(rs []queue.CostRecord) map[string]queue.CostRecord {
	m := map[string]queue.CostRecord{}
	for _, r := range rs {
		k := fmt.Sprintf("%s %s %s %s %s", r.Day.Format(time.DateOnly), r.Tenant, r.Type, r.Pool, record.EncodeTags(r.Tags))
		s := m[k]
		s.Day, s.Tenant, s.Type, s.Pool, s.Tags = r.Day, r.Tenant, r.Type, r.Pool, r.Tags
		s.Runs += r.Runs
		s.Failed += r.Failed
		s.RunTime += r.RunTime
		s.PicoUSD += r.PicoUSD
		m[k] = s
	}
	return m
}

// Every ended attempt is recorded on the day it ended, with the price the
// claim recorded × its run time: successes in one batch, a failure (and
// its retry's success) one by one; a new day starts a new record.
func TestCostRecords(t *testing.T) {
	e := newEnv(t)
	tenant := func(n string) func(*task.Spec) { return func(s *task.Spec) { s.Tenant = n } }
	gpu := func(s *task.Spec) { s.Tags = map[string]string{"gpu": "a100"} }
	day := queue.CostDay(e.clock.Now())
	// Two of acme's at $3.60/h for 2 s each: 2 × $0.002.
	e.submit("cpu", tenant("acme"), gpu)
	e.submit("cpu", tenant("acme"), gpu)
	ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w1", N: 10, Price: 3.6})
	if err != nil || len(ts) != 2 {
		t.Fatal(len(ts), err)
	}
	e.clock.Advance(2 * time.Second)
	var cs []queue.Completion
	for _, tk := range ts {
		cs = append(cs, queue.Completion{ID: tk.ID, Token: tk.LeaseToken})
	}
	if _, err := e.s.Complete(e.ctx, cs...); err != nil {
		t.Fatal(err)
	}
	// One of the default tenant at $0.36/h: fails after 500 ms, then
	// succeeds after 1 s (the next day).
	id := e.submit("spot", retries(1))
	tk, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "spot", Worker: "w1", N: 1, Price: 0.36})
	if err != nil || len(tk) != 1 {
		t.Fatal(err)
	}
	e.clock.Advance(500 * time.Millisecond)
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk[0].LeaseToken, Error: "boom", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(24 * time.Hour)
	if _, err := e.s.Promote(e.ctx, leader, 100); err != nil {
		t.Fatal(err)
	}
	tk, err = e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "spot", Worker: "w1", N: 1, Price: 0.36})
	if err != nil || len(tk) != 1 {
		t.Fatal(len(tk), err)
	}
	e.clock.Advance(time.Second)
	if _, err := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: tk[0].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	rs, err := e.s.Costs(e.ctx, day, day.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	next := day.Add(24 * time.Hour)
	want := map[string]queue.CostRecord{
		day.Format(time.DateOnly) + " acme test.noop cpu gpu=a100": {Day: day, Tenant: "acme", Type: "test.noop", Pool: "cpu",
			Tags: map[string]string{"gpu": "a100"}, Runs: 2, RunTime: 4 * time.Second, PicoUSD: 4_000_000_000},
		day.Format(time.DateOnly) + " default test.noop spot ": {Day: day, Tenant: "default", Type: "test.noop", Pool: "spot",
			Runs: 1, Failed: 1, RunTime: 500 * time.Millisecond, PicoUSD: 50_000_000},
		next.Format(time.DateOnly) + " default test.noop spot ": {Day: next, Tenant: "default", Type: "test.noop", Pool: "spot",
			Runs: 1, RunTime: time.Second, PicoUSD: 100_000_000},
	}
	if d := cmp.Diff(want, costSum(rs)); d != "" {
		t.Fatalf("cost records (-want +got):\n%s", d)
	}
	// Keys expire: none is kept forever.
	for _, k := range e.keys("ax:*cost:*") {
		if ttl := e.rdb.PTTL(e.ctx, k).Val(); ttl <= 0 || ttl > queue.MaxCostDays*24*time.Hour {
			t.Fatalf("%s: ttl %v", k, ttl)
		}
	}
	// A range outside the records is empty; one too long is refused.
	if rs, err := e.s.Costs(e.ctx, day.Add(-48*time.Hour), day.Add(-24*time.Hour)); err != nil || len(rs) != 0 {
		t.Fatalf("before: %v %v", rs, err)
	}
	if _, err := e.s.Costs(e.ctx, day, day.Add(queue.MaxCostDays*24*time.Hour)); err == nil {
		t.Fatal("a range past MaxCostDays was read")
	}
}

// Authoritative admission: a task with AdmitMax is made READY only while
// its pool holds fewer READY tasks than that, counted within one call too;
// a claim makes room; delayed tasks and tasks without the limit pass.
func TestSubmitAdmitMax(t *testing.T) {
	e := newEnv(t, oneShard)
	batch := make([]queue.NewTask, 5)
	for i := range batch {
		batch[i] = queue.NewTask{Spec: e.spec(), Pool: "cpu", AdmitMax: 3}
	}
	res, err := e.s.Submit(e.ctx, batch...)
	if err != nil {
		t.Fatal(err)
	}
	var full int
	for _, r := range res {
		switch {
		case errors.Is(r.Err, queue.ErrPoolFull):
			full++
			if _, err := e.s.Get(e.ctx, r.ID); !errors.Is(err, task.ErrNotFound) {
				t.Fatalf("a refused task was stored: %v", err)
			}
		case r.Err != nil || r.State != task.Ready:
			t.Fatalf("%+v", r)
		}
	}
	if full != 2 {
		t.Fatalf("%d refused, want 2: %+v", full, res)
	}
	one := func(nt queue.NewTask) error {
		res, err := e.s.Submit(e.ctx, nt)
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Err
	}
	if err := one(queue.NewTask{Spec: e.spec(), Pool: "cpu", AdmitMax: 3}); !errors.Is(err, queue.ErrPoolFull) {
		t.Fatalf("4th: %v", err)
	}
	if err := one(queue.NewTask{Spec: e.spec(delay(time.Minute)), Pool: "cpu", Pinned: true, AdmitMax: 3}); err != nil {
		t.Fatalf("delayed: %v", err)
	}
	if err := one(queue.NewTask{Spec: e.spec(), Pool: "cpu"}); err != nil {
		t.Fatalf("without a limit (critical): %v", err)
	}
	if err := one(queue.NewTask{Spec: e.spec(), Pool: "gpu", AdmitMax: 3}); err != nil {
		t.Fatalf("another pool: %v", err)
	}
	e.claim("cpu", 2)
	if err := one(queue.NewTask{Spec: e.spec(), Pool: "cpu", AdmitMax: 3}); err != nil {
		t.Fatalf("after a claim: %v", err)
	}
}

// Attempts that end without complete or fail are cost records too: a
// return (preemption, a worker's shutdown) from its claim to the return,
// a lease expiry from its claim to the end of its lease (the reaper cannot
// know when the handler stopped); both count as not succeeded.
func TestCostRecordsOfReturnedAndExpiredAttempts(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Lease = 5 * time.Second })
	day := queue.CostDay(e.clock.Now())
	returned := e.submit("gpu", retries(2))
	ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "gpu", Worker: "w1", N: 1, Price: 3.6})
	if err != nil || len(ts) != 1 {
		t.Fatal(len(ts), err)
	}
	e.clock.Advance(3 * time.Second)
	if _, err := e.s.Return(e.ctx, returned, ts[0].LeaseToken, task.ReasonPreempted, 0); err != nil {
		t.Fatal(err)
	}
	ts, err = e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "gpu", Worker: "w1", N: 1, Price: 3.6})
	if err != nil || len(ts) != 1 || ts[0].ID != returned {
		t.Fatal(len(ts), err)
	}
	e.clock.Advance(20 * time.Second) // no heartbeat: the lease ran out 15 s ago
	if n, _, err := e.s.Reap(e.ctx, leader, 10); err != nil || n != 1 {
		t.Fatalf("reaped %d, %v", n, err)
	}
	rs, err := e.s.Costs(e.ctx, day, day)
	if err != nil {
		t.Fatal(err)
	}
	// 3 s returned + 5 s of lease, at $3.60/h: $0.008.
	want := map[string]queue.CostRecord{
		day.Format(time.DateOnly) + " default test.noop gpu ": {Day: day, Tenant: "default", Type: "test.noop", Pool: "gpu",
			Runs: 2, Failed: 2, RunTime: 8 * time.Second, PicoUSD: 8_000_000_000},
	}
	if d := cmp.Diff(want, costSum(rs)); d != "" {
		t.Fatalf("cost records (-want +got):\n%s", d)
	}
}

// A day's records hold each tenant's fields apart: with thousands of
// another tenant's fields in the hash, acme's attempt is acme's own
// record, and a tenant past its own fields (COST_CAP) is counted under its
// own name with type _other, never under another's or tenant _other.
func TestCostRecordsStayPerTenant(t *testing.T) {
	e := newEnv(t)
	tenant := func(n string) func(*task.Spec) { return func(s *task.Spec) { s.Tenant = n } }
	typ := func(n string) func(*task.Spec) { return func(s *task.Spec) { s.Type = n } }
	day := queue.CostDay(e.clock.Now())
	key := e.s.Prefix(0) + "cost:" + fmt.Sprint(day.Unix()/86400)
	// flood holds 5000 fields, 600 of them counted as its own.
	fields := map[string]any{"\tn\tflood": 600}
	for i := range 5000 {
		fields[fmt.Sprintf("flood\tt%d\tcpu\t", i)] = "1 0 1000 1"
	}
	if err := e.rdb.HSet(e.ctx, key, fields).Err(); err != nil {
		t.Fatal(err)
	}
	e.submit("cpu", tenant("acme"), typ("report"))
	e.submit("cpu", tenant("flood"), typ("brand-new"))
	ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w1", N: 10, Price: 3.6})
	if err != nil || len(ts) != 2 {
		t.Fatal(len(ts), err)
	}
	e.clock.Advance(time.Second)
	for _, tk := range ts {
		if _, err := e.s.Complete(e.ctx, queue.Completion{ID: tk.ID, Token: tk.LeaseToken}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := e.s.Costs(e.ctx, day, day)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range costSum(rs) {
		if r.Tenant != "flood" || r.Type == queue.CostOther {
			got[r.Tenant+"/"+r.Type] += r.Runs
		}
	}
	want := map[string]int64{"acme/report": 1, "flood/" + queue.CostOther: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("records other than flood's seeded ones (-want +got):\n%s", diff)
	}
}

// A fractional task costs its share of the slot's price per second: at
// $3.60/h for 2 s, a task of slots 0.25 costs $0.0005 (a whole one
// $0.002), succeeded or failed; its run time stays wall time.
func TestCostRecordsOfFractionalTasks(t *testing.T) {
	e := newEnv(t, oneShard)
	day := queue.CostDay(e.clock.Now())
	ok := e.submit("gpu", slotsOf(0.25))
	bad := e.submit("gpu", slotsOf(0.25))
	ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "gpu", Worker: "w1", N: 10, Price: 3.6, Room: 1000})
	if err != nil || len(ts) != 2 {
		t.Fatal(len(ts), err)
	}
	e.clock.Advance(2 * time.Second)
	for _, tk := range ts {
		if tk.ID == ok {
			e.complete(tk)
		} else if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: bad, Token: tk.LeaseToken, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := e.s.Costs(e.ctx, day, day)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]queue.CostRecord{
		day.Format(time.DateOnly) + " default test.noop gpu ": {Day: day, Tenant: "default", Type: "test.noop", Pool: "gpu",
			Runs: 2, Failed: 1, RunTime: 4 * time.Second, PicoUSD: 1_000_000_000},
	}
	if d := cmp.Diff(want, costSum(rs)); d != "" {
		t.Fatalf("cost records (-want +got):\n%s", d)
	}
}

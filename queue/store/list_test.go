package store_test

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// TestList lists a shard's tasks newest first through each index (the
// ready sets, running, dead, delayed) and the record scan, pages by id,
// and filters by type, tenant, pool, payload and created range.
func TestList(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.ColdHorizon = 5 * time.Minute })
	tenant := func(n string) func(*task.Spec) { return func(s *task.Spec) { s.Tenant = n } }
	typ := func(n string) func(*task.Spec) { return func(s *task.Spec) { s.Type = n } }
	var ids []string // oldest first
	for i := 0; i < 6; i++ {
		ids = append(ids, e.submit("cpu", tenant("acme")))
		e.clock.Advance(time.Millisecond)
	}
	gpu := e.submit("gpu", tenant("other"), typ("render"), func(s *task.Spec) { s.LimitKey = "render-api" })
	e.clock.Advance(time.Millisecond)
	later := e.submit("cpu", delay(time.Hour)) // in the cold tier: no record
	if n, _ := e.s.ColdWaiting(e.ctx); n != 1 {
		t.Fatalf("cold tasks: %d, want 1", n)
	}
	running := e.claimOne("cpu").ID
	e.clock.Advance(time.Millisecond)
	// A failed one: claim, fail without retry.
	dead := e.submit("gpu", retries(0), typ("render"))
	tk := e.claim("gpu", 2)
	for _, x := range tk {
		if x.ID == dead {
			if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: dead, Token: x.LeaseToken, Error: "boom"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := func(q queue.ListQuery) ([]string, bool) {
		t.Helper()
		ts, more, err := e.s.List(e.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range ts {
			if x.HeldBy != "eu-west" {
				t.Fatalf("held by %q", x.HeldBy)
			}
			out = append(out, x.ID)
		}
		return out, more
	}
	eq := func(name string, got, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: got %v, want %v", name, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: got %v, want %v", name, got, want)
			}
		}
	}
	all, more := list(queue.ListQuery{Limit: 100})
	if more || len(all) != 9 {
		t.Fatalf("all: %v more=%v", all, more)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1] <= all[i] {
			t.Fatalf("not newest first: %v", all)
		}
	}
	// Pages of 4 by id cover everything once.
	var paged []string
	before := ""
	for {
		got, more := list(queue.ListQuery{Limit: 4, Before: before})
		paged = append(paged, got...)
		if !more {
			break
		}
		before = got[len(got)-1]
	}
	eq("paged", paged, all)

	got, _ := list(queue.ListQuery{State: task.Running, Limit: 10})
	if len(got) != 2 || !contains(got, running) || contains(got, dead) {
		t.Fatalf("running: %v (want %s and gpu's)", got, running)
	}
	got, _ = list(queue.ListQuery{State: task.Failed, Limit: 10})
	eq("failed", got, []string{dead})
	got, _ = list(queue.ListQuery{State: task.Pending, Limit: 10})
	eq("pending", got, []string{later})
	var readyCPU []string // newest first, less the one claimed (the oldest of a shard)
	for i := len(ids) - 1; i >= 0; i-- {
		if ids[i] != running {
			readyCPU = append(readyCPU, ids[i])
		}
	}
	got, _ = list(queue.ListQuery{State: task.Ready, Pool: "cpu", Limit: 10})
	eq("ready cpu", got, readyCPU)
	got, _ = list(queue.ListQuery{State: task.Ready, Pool: "gpu", Limit: 10})
	if len(got) != 0 {
		t.Fatalf("ready gpu: %v", got) // gpu's first was claimed with the dead one
	}
	got, _ = list(queue.ListQuery{LimitKey: "render-api", Limit: 10})
	eq("limit key", got, []string{gpu})
	got, _ = list(queue.ListQuery{Tenant: "other", Limit: 10})
	eq("tenant", got, []string{gpu})
	got, _ = list(queue.ListQuery{Type: "render", Limit: 10})
	eq("type", got, []string{dead, gpu})
	got, _ = list(queue.ListQuery{Pool: "gpu", Tenant: "acme", Limit: 10})
	if len(got) != 0 {
		t.Fatalf("pool and tenant: %v", got)
	}
	got, _ = list(queue.ListQuery{Payload: `"n":1`, Limit: 3})
	eq("payload", got, all[:3])
	got, _ = list(queue.ListQuery{Payload: `"n":2`, Limit: 3})
	if len(got) != 0 {
		t.Fatalf("payload miss: %v", got)
	}
	// Created range: the six first tasks were made 1 ms apart from the clock's start.
	t0 := newFakeClock().Now()
	got, _ = list(queue.ListQuery{CreatedFrom: t0.Add(2 * time.Millisecond), CreatedTo: t0.Add(4 * time.Millisecond), Limit: 10})
	eq("created", got, []string{ids[3], ids[2]})
	// The cold task is listed as PENDING and stays cold.
	ts, _, err := e.s.List(e.ctx, queue.ListQuery{State: task.Pending, Limit: 10})
	if err != nil || len(ts) != 1 || ts[0].State != task.Pending || ts[0].DueAt == nil || ts[0].Type != "test.noop" {
		t.Fatalf("cold listed: %+v %v", ts, err)
	}
	if n, _ := e.s.ColdWaiting(e.ctx); n != 1 {
		t.Fatalf("a listing thawed the cold task: %d cold", n)
	}
}

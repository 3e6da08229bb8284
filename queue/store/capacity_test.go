package store_test

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// A pool's capacity window is a limit every claim of the pool counts: a
// window lending 3 slots runs 3 tasks at once however many a worker asks
// for, other pools are untouched, a closed window runs none (its tasks
// wait READY, no attempt spent), and an opened one releases them.
func TestCapacityWindowHoldsClaims(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setLimits(queue.Limit{Kind: queue.LimitPool, Name: "p", Concurrency: 3})
	for range 6 {
		e.submit("p")
	}
	e.submit("other")
	e.submit("other")
	running := e.claim("p", 4)
	if len(running) != 3 {
		t.Fatalf("a window of 3: a claim of 4 took %d", len(running))
	}
	if ts := e.claim("p", 4); len(ts) != 0 {
		t.Fatalf("a window of 3 with 3 running: a claim took %d more", len(ts))
	}
	if ts := e.claim("other", 4); len(ts) != 2 {
		t.Fatalf("a pool without a window: claimed %d of 2", len(ts))
	}
	e.complete(running[0])
	running = running[1:]
	e.clock.Advance(1100 * time.Millisecond) // parked tasks are looked at again
	if ts := e.claim("p", 4); len(ts) != 1 {
		t.Fatalf("one slot freed: claimed %d", len(ts))
	} else {
		running = append(running, ts...)
	}
	e.complete(running...)
	// Closed: nothing starts, nothing is spent.
	e.setLimits(queue.Limit{Kind: queue.LimitPool, Name: "p", Closed: true})
	e.clock.Advance(1100 * time.Millisecond)
	if ts := e.claim("p", 4); len(ts) != 0 {
		t.Fatalf("a closed window: claimed %d", len(ts))
	}
	if st := e.limitState(queue.LimitPool, "p"); st.Running != 0 || st.Parked != 2 {
		t.Errorf("closed: %+v, want 0 running, 2 parked", st)
	}
	ls, _, err := e.s.List(e.ctx, queue.ListQuery{State: task.Ready, Pool: "p", Limit: 10})
	if err != nil || len(ls) != 2 {
		t.Fatalf("READY in p: %d %v, want 2", len(ls), err)
	}
	for _, tk := range ls {
		if tk.Attempts != 0 {
			t.Errorf("%s: %d attempts while the window was closed", tk.ID, tk.Attempts)
		}
	}
	e.setLimits(queue.Limit{Kind: queue.LimitPool, Name: "p", Concurrency: 1})
	if ts := e.claim("p", 4); len(ts) != 1 {
		t.Fatalf("opened with 1 slot: claimed %d", len(ts))
	}
}

package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// The cold tier (cold.go): tasks due later than the horizon wait without a
// record, are read and acted on as ordinary delayed tasks, and reach the
// hot tier through the leader's fenced PromoteCold without loss across a
// leader change.
func TestColdTier(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.ColdHorizon = 5 * time.Minute })
	sp := e.spec(delay(time.Hour), prio(2))
	var batch []queue.NewTask
	for range 1200 {
		batch = append(batch, queue.NewTask{Spec: sp, Pool: "gpu", Pinned: true})
	}
	var cold []string
	for start := 0; start < len(batch); start += queue.MaxBatch {
		res, err := e.s.Submit(e.ctx, batch[start:min(start+queue.MaxBatch, len(batch))]...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || r.State != task.Pending {
				t.Fatalf("submit: %+v", r)
			}
			cold = append(cold, r.ID)
		}
	}
	unplaced := e.submit("", delay(2*time.Hour))
	hot := e.submit("gpu", delay(time.Minute))
	keyed := e.submit("gpu", delay(time.Hour), func(s *task.Spec) { s.IdempotencyKey = "k1" })
	waiting := func() int {
		t.Helper()
		n, err := e.s.ColdWaiting(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := waiting(); n != 1201 {
		t.Fatalf("cold: %d, want 1201 (the 1200 pinned and the unplaced one; not the one due in a minute or the keyed one)", n)
	}
	if ks := e.keys("*:t:" + cold[7]); len(ks) != 0 {
		t.Fatalf("a cold task has a record: %v", ks)
	}
	for _, id := range []string{hot, keyed} {
		if ks := e.keys("*:t:" + id); len(ks) != 1 {
			t.Fatalf("hot task %s has no record", id)
		}
	}
	if c, _ := e.s.Counts(e.ctx); c.Pending != 1203 {
		t.Fatalf("pending %d, want 1203", c.Pending)
	}

	// Reads and actions thaw the task they name; it is PENDING as submitted.
	due := e.clock.Now().Add(time.Hour).Truncate(time.Millisecond)
	tk, err := e.s.Get(e.ctx, cold[0])
	if err != nil || tk.State != task.Pending || tk.Reason != task.ReasonSubmitted || tk.Pool != "gpu" || !tk.Pinned ||
		tk.DueAt == nil || !tk.DueAt.Equal(due) || tk.Type != "test.noop" || string(tk.Payload) != `{"n":1}` || tk.Priority != 2 {
		t.Fatalf("get of a cold task: %+v %v", tk, err)
	}
	if !tk.CreatedAt.Equal(e.clock.Now().Truncate(time.Millisecond)) {
		t.Fatalf("created at %v, want %v", tk.CreatedAt, e.clock.Now())
	}
	if st, err := e.s.Cancel(e.ctx, cold[1], "", "op"); err != nil || st != task.Canceled {
		t.Fatalf("cancel of a cold task: %s %v", st, err)
	}
	if err := e.s.SetPriority(e.ctx, cold[2], 0, "op"); err != nil {
		t.Fatalf("priority of a cold task: %v", err)
	}
	if tk, _ := e.s.Get(e.ctx, cold[2]); tk.Priority != 0 || tk.State != task.Pending {
		t.Fatalf("after the priority change: %+v", tk)
	}
	var te *task.TransitionError
	if err := e.s.Replay(e.ctx, cold[3], "op"); !errors.As(err, &te) || te.State != task.Pending {
		t.Fatalf("replay of a cold (PENDING) task: %v, want a transition error in PENDING", err)
	}
	if tr, err := e.s.Trail(e.ctx, cold[4]); err != nil || len(tr) != 1 || tr[0].To != task.Pending || tr[0].Reason != task.ReasonSubmitted {
		t.Fatalf("trail of a cold task: %+v %v", tr, err)
	}
	if _, err := e.s.Get(e.ctx, "0000000000vvvvvv.0.eu-west"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("get of an unknown id: %v", err)
	}
	if n := waiting(); n != 1196 {
		t.Fatalf("cold after touching 5: %d, want 1196", n)
	}
	// Bulk actions see cold tasks as the PENDING ones they are.
	seen := map[string]bool{}
	err = e.s.Waiting(e.ctx, queue.Filter{State: task.Pending, Type: "test.noop"}, func(ts []*task.Task) error {
		for _, x := range ts {
			if x.State != task.Pending || seen[x.ID] {
				t.Fatalf("waiting: %s %s (seen before: %v)", x.ID, x.State, seen[x.ID])
			}
			seen[x.ID] = true
		}
		return nil
	})
	if err != nil || len(seen) != 1202 || !seen[cold[1000]] || !seen[unplaced] || seen[cold[1]] {
		t.Fatalf("waiting: %d tasks %v; want the 1199 pinned not cancelled, the unplaced, the hot and the keyed ones", len(seen), err)
	}

	// Nothing is promoted before half a horizon ahead of the bucket.
	if n, next, err := e.s.PromoteCold(e.ctx, leader, queue.MaxBatch); err != nil || n != 0 || next.IsZero() || next.After(due) {
		t.Fatalf("promote cold an hour ahead: %d %v %v", n, next, err)
	}
	e.clock.Advance(58 * time.Minute)
	// A deposed leader changes nothing; the new one moves every task once,
	// in bounded calls.
	if n, _, err := e.s.PromoteCold(e.ctx, queue.Fence{Name: leader.Name, Token: leader.Token - 1}, queue.MaxBatch); !errors.Is(err, queue.ErrFenced) || n != 0 {
		t.Fatalf("older leader: %d %v, want fenced", n, err)
	}
	moved, f := 0, leader
	for calls := 0; ; calls++ {
		n, _, err := e.s.PromoteCold(e.ctx, f, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n > 100*e.s.Options().Shards {
			t.Fatalf("one call moved %d, more than its limit", n)
		}
		if n == 0 {
			break
		}
		moved += n
		if calls == 3 {
			f.Token++ // a new leader takes over half way
		}
	}
	if moved != 1195 || waiting() != 1 {
		t.Fatalf("moved %d (want 1195), cold %d (want 1, the unplaced one due later)", moved, waiting())
	}
	if ks := e.keys("*:cs:*"); len(ks) != 1 {
		t.Fatalf("templates left: %v, want only the unplaced task's", ks)
	}
	if ks := e.keys("*:cb:*"); len(ks) != 1 {
		t.Fatalf("buckets left: %v, want only the unplaced task's", ks)
	}
	// Hot from here: promoted when due, claimed, completed.
	e.clock.Advance(3 * time.Minute)
	ready := 0
	for {
		res, err := e.s.Promote(e.ctx, f, queue.MaxBatch)
		if err != nil {
			t.Fatal(err)
		}
		if res.Moved == 0 {
			break
		}
		ready += res.Ready
	}
	// 1200 − 1 cancelled, plus the one due in a minute and the keyed one.
	if ready != 1201 {
		t.Fatalf("made READY %d, want 1201", ready)
	}
	w := e.claimOne("gpu")
	if w.Priority != 0 || w.ID != cold[2] {
		t.Fatalf("first claim %s (priority %d), want %s, raised to 0 while cold", w.ID, w.Priority, cold[2])
	}
	if errs, err := e.s.Complete(e.ctx, queue.Completion{ID: w.ID, Token: w.LeaseToken}); err != nil || errs[0] != nil {
		t.Fatalf("complete: %v %v", err, errs)
	}
	// The unplaced one goes to the due set for placement.
	e.clock.Advance(time.Hour)
	if n, _, err := e.s.PromoteCold(e.ctx, f, queue.MaxBatch); err != nil || n != 1 || waiting() != 0 {
		t.Fatalf("promote cold unplaced: %d %v", n, err)
	}
	if _, err := e.s.Promote(e.ctx, f, queue.MaxBatch); err != nil {
		t.Fatal(err)
	}
	ds, err := e.s.DueTasks(e.ctx, 10)
	if err != nil || len(ds) != 1 || ds[0].ID != unplaced {
		t.Fatalf("due tasks: %v %v, want the unplaced one", ds, err)
	}
	if ks := append(e.keys("*:cs:*"), e.keys("*:cb:*")...); len(ks) != 0 {
		t.Fatalf("cold keys left: %v", ks)
	}
	if c, _ := e.s.Counts(e.ctx); c.Pending != 1 || c.Ready != 1200 {
		t.Fatalf("counts at the end: %+v", c)
	}
}

// Tasks of one call that differ only in their due time share one template.
func TestColdTemplatesByContent(t *testing.T) {
	e := newEnv(t, oneShard, func(o *queue.Options) { o.ColdHorizon = 5 * time.Minute })
	var batch []queue.NewTask
	for i := range 50 {
		batch = append(batch, queue.NewTask{Spec: e.spec(delay(time.Hour + time.Duration(i)*time.Second)), Pool: "gpu", Pinned: true})
	}
	batch = append(batch, queue.NewTask{Spec: e.spec(delay(time.Hour), prio(0)), Pool: "gpu", Pinned: true})
	if _, err := e.s.Submit(e.ctx, batch...); err != nil {
		t.Fatal(err)
	}
	if ks := e.keys("*:cs:*"); len(ks) != 2 {
		t.Fatalf("templates %v, want 2 (one per distinct spec)", ks)
	}
	if ks := e.keys("*:cb:*"); len(ks) != 5 {
		t.Fatalf("buckets %v, want 5 (50 s of due times in 10 s buckets, the first aligned)", ks)
	}
}

package store_test

import (
	"errors"
	"testing"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Re-placement: the leader takes READY tasks out of a pool
// whose price rose or whose window closed, into the due set, with a
// REPLACED_COST step; pinned, claimed and moved tasks stay; a deposed
// leader moves nothing; a keyed task keeps its key; placed again, each
// task is in one pool only.
func TestReplaceMovesReadyTasksOnce(t *testing.T) {
	e := newEnv(t, oneShard) // "the oldest" is claimed first within a shard
	placed := func(mod ...func(*task.Spec)) string {
		t.Helper()
		res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(mod...), Pool: "spot"})
		if err != nil || res[0].Err != nil {
			t.Fatalf("submit: %v %v", err, res)
		}
		return res[0].ID
	}
	var ids []string
	for range 4 {
		ids = append(ids, placed())
	}
	keyed := func(s *task.Spec) { s.IdempotencyKey = "order-7" }
	key := placed(keyed)
	pinned := e.submit("spot")
	running := e.claim("spot", 1)
	if len(running) != 1 || running[0].ID != ids[0] {
		t.Fatalf("claimed %v, want %s (the oldest)", running, ids[0])
	}
	all := append(append([]string(nil), ids...), key, pinned)

	if err := e.s.Fence(e.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.Replace(e.ctx, queue.Fence{Name: leader.Name, Token: leader.Token - 1}, "spot", "x", all); !errors.Is(err, queue.ErrFenced) || n != 0 {
		t.Fatalf("a deposed leader: moved %d, %v", n, err)
	}
	n, err := e.s.Replace(e.ctx, leader, "spot", "price 0.085 ≥ 1.5 × 0.017", all)
	if err != nil || n != 4 {
		t.Fatalf("moved %d, %v; want 4 (3 READY + the keyed one)", n, err)
	}
	if n, err := e.s.Replace(e.ctx, leader, "spot", "again", all); err != nil || n != 0 {
		t.Fatalf("a second call moved %d, %v; want 0", n, err)
	}
	for _, id := range append(ids[1:], key) {
		tk, err := e.s.Get(e.ctx, id)
		if err != nil || tk.State != task.Pending || tk.Pool != "" {
			t.Fatalf("%s: %+v %v; want PENDING, no pool", id, tk, err)
		}
		tr, err := e.s.Trail(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		last := tr[len(tr)-1]
		if last.From != task.Ready || last.To != task.Pending || last.Reason != task.ReasonReplacedCost {
			t.Fatalf("%s: last step %+v", id, last)
		}
	}
	if st := e.state(pinned); st != task.Ready {
		t.Fatalf("pinned task is %s, want READY in its pool", st)
	}
	if st := e.state(ids[0]); st != task.Running {
		t.Fatalf("claimed task is %s", st)
	}
	c, err := e.s.Counts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.ReadyIn("spot") != 1 || c.Pending != 4 {
		t.Fatalf("counts: %d READY in spot, %d PENDING; want 1, 4", c.ReadyIn("spot"), c.Pending)
	}
	// The place loop's step: due tasks into the now-cheapest pool.
	due, err := e.s.DueTasks(e.ctx, 100)
	if err != nil || len(due) != 4 {
		t.Fatalf("due %d, %v; want 4", len(due), err)
	}
	var as []queue.Assignment
	for _, d := range due {
		as = append(as, queue.Assignment{ID: d.ID, Pool: "ondemand"})
	}
	if _, err := e.s.Place(e.ctx, leader, as); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.s.Counts(e.ctx); c.ReadyIn("ondemand") != 4 || c.ReadyIn("spot") != 1 {
		t.Fatalf("after placing: %d in ondemand, %d in spot", c.ReadyIn("ondemand"), c.ReadyIn("spot"))
	}
	// The key still names its task.
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(keyed), Pool: "spot"})
	if err != nil || !res[0].Duplicate || res[0].ID != key {
		t.Fatalf("keyed resubmit: %+v %v; want the first task %s", res, err, key)
	}
	got := e.claim("ondemand", 10)
	if len(got) != 4 {
		t.Fatalf("claimed %d in ondemand, want 4", len(got))
	}
	if more := e.claim("spot", 10); len(more) != 1 || more[0].ID != pinned {
		t.Fatalf("spot still held %v, want only the pinned task", more)
	}
}

package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

func TestPinnedDelayedLifecycle(t *testing.T) {
	e := newEnv(t)
	id := e.submit("gpu", delay(10*time.Second), prio(2))
	due := e.clock.Now().Add(10 * time.Second).Truncate(time.Millisecond)
	if st := e.state(id); st != task.Pending {
		t.Fatalf("before due: %s, want PENDING", st)
	}
	res, err := e.s.Promote(e.ctx, leader, 100)
	if err != nil || res.Moved != 0 || !res.NextDue.Equal(due) {
		t.Fatalf("promote before due: %+v %v, want nothing moved and next due %v", res, err, due)
	}
	e.clock.Advance(11 * time.Second)
	if res, err = e.s.Promote(e.ctx, leader, 100); err != nil || res.Moved != 1 || res.Ready != 1 || !res.NextDue.IsZero() {
		t.Fatalf("promote: %+v %v, want 1 moved, 1 ready, no next due", res, err)
	}
	tk, err := e.s.Get(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != task.Ready || tk.Reason != task.ReasonDue || tk.ReadyAt == nil || !tk.ReadyAt.Equal(due) || tk.Pool != "gpu" {
		t.Fatalf("after promotion: %s %s ready %v pool %s; want READY DUE at %v in gpu", tk.State, tk.Reason, tk.ReadyAt, tk.Pool, due)
	}
	c, _ := e.s.Counts(e.ctx)
	if c.Pending != 0 || c.Ready != 1 || c.ReadyBy["gpu"][2] != 1 {
		t.Fatalf("counts after promotion: %+v", c)
	}
	tr, err := e.s.Trail(e.ctx, id)
	if err != nil || len(tr) != 2 || tr[1].From != task.Pending || tr[1].To != task.Ready || tr[1].Reason != task.ReasonDue || !tr[1].At.Equal(due) {
		t.Fatalf("trail while READY: %+v %v", tr, err)
	}
	w := e.claimOne("gpu")
	if w.ID != id || w.ReadyAt == nil || !w.ReadyAt.Equal(due) || w.State != task.Running {
		t.Fatalf("claimed %+v", w)
	}
	if errs, err := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: w.LeaseToken}); err != nil || errs[0] != nil {
		t.Fatalf("complete: %v %v", err, errs)
	}
	tr, err = e.s.Trail(e.ctx, id)
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
	want := "[>PENDING SUBMITTED PENDING>READY DUE READY>RUNNING CLAIMED RUNNING>SUCCESS COMPLETED]"
	if fmt.Sprint(steps) != want {
		t.Fatalf("trail %v, want %s", steps, want)
	}
	if tr[1].At != due {
		t.Fatalf("READY at %v, want the due time %v", tr[1].At, due)
	}
}

func TestPinnedDelayedCancelAndPriority(t *testing.T) {
	e := newEnv(t)
	waiting := e.submit("cpu", delay(time.Minute), prio(3))
	bumped := e.submit("cpu", delay(time.Minute), prio(3))
	readyOne := e.submit("cpu", delay(time.Second), prio(3))
	e.clock.Advance(2 * time.Second)
	if _, err := e.s.Promote(e.ctx, leader, 100); err != nil {
		t.Fatal(err)
	}
	if st := e.state(readyOne); st != task.Ready {
		t.Fatalf("due task %s", st)
	}
	// Cancel while waiting and while (implicitly) READY.
	for _, id := range []string{waiting, readyOne} {
		if st, err := e.s.Cancel(e.ctx, id, "", "op"); err != nil || st != task.Canceled {
			t.Fatalf("cancel %s: %s %v", id, st, err)
		}
	}
	c, _ := e.s.Counts(e.ctx)
	if c.Pending != 1 || c.Ready != 0 || c.ReadyBy["cpu"][3] != 0 {
		t.Fatalf("counts after cancels: %+v", c)
	}
	// A cancelled task is never promoted nor claimed.
	if err := e.s.SetPriority(e.ctx, bumped, 0, "op"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	res, err := e.s.Promote(e.ctx, leader, 100)
	if err != nil || res.Ready != 1 {
		t.Fatalf("promote: %+v %v, want the bumped task only", res, err)
	}
	tk, _ := e.s.Get(e.ctx, bumped)
	if tk.State != task.Ready || tk.Priority != 0 {
		t.Fatalf("bumped: %s prio %d", tk.State, tk.Priority)
	}
	ts := e.claim("cpu", 10)
	if len(ts) != 1 || ts[0].ID != bumped {
		t.Fatalf("claimed %d tasks, want only %s", len(ts), bumped)
	}
	if c, _ := e.s.Counts(e.ctx); c.Pending != 0 || c.Ready != 0 || c.Running != 1 {
		t.Fatalf("final counts %+v", c)
	}
}

func TestPinnedDelayedBoundedBatchesAndNextDue(t *testing.T) {
	e := newEnv(t, oneShard) // the bounds are per shard
	var batch []queue.NewTask
	for i := 0; i < 1200; i++ {
		p := i % 2
		batch = append(batch, queue.NewTask{Spec: e.spec(delay(time.Second), prio(p)), Pool: "cpu", Pinned: true})
	}
	for start := 0; start < len(batch); start += queue.MaxBatch {
		if _, err := e.s.Submit(e.ctx, batch[start:min(start+queue.MaxBatch, len(batch))]...); err != nil {
			t.Fatal(err)
		}
	}
	later := e.submit("cpu", delay(time.Hour))
	classic := e.submit("", delay(time.Second)) // unpinned: the due set, for placement
	e.clock.Advance(2 * time.Second)
	first, err := e.s.Promote(e.ctx, leader, 700)
	if err != nil || first.Moved != 700 || !first.NextDue.Equal(e.clock.Now().Add(-time.Second).Truncate(time.Millisecond)) {
		t.Fatalf("first pass: %+v %v, want 700 moved, more due now", first, err)
	}
	res, err := e.s.Promote(e.ctx, leader, 1000)
	if err != nil || first.Moved+res.Moved != 1201 || first.Ready+res.Ready != 1200 {
		t.Fatalf("second pass: %+v %v after %+v, want 1201 moved in all (1200 ready, 1 unpinned)", res, err, first)
	}
	if want := e.clock.Now().Add(time.Hour - 2*time.Second).Truncate(time.Millisecond); !res.NextDue.Equal(want) {
		t.Fatalf("next due %v, want %v", res.NextDue, want)
	}
	c, _ := e.s.Counts(e.ctx)
	if c.Ready != 1200 || c.ReadyBy["cpu"][0] != 600 || c.ReadyBy["cpu"][1] != 600 || c.Pending != 2 {
		t.Fatalf("counts %+v", c)
	}
	if st := e.state(later); st != task.Pending {
		t.Fatalf("task due in an hour: %s", st)
	}
	due, _ := e.s.DueTasks(e.ctx, 10)
	if len(due) != 1 || due[0].ID != classic {
		t.Fatalf("due set %v, want the unpinned task", due)
	}
	// Waiting sees both kinds; CancelWhere cancels them.
	var pend, ready int
	if err := e.s.Waiting(e.ctx, queue.Filter{}, func(ts []*task.Task) error {
		for _, x := range ts {
			switch x.State {
			case task.Pending:
				pend++
			case task.Ready:
				ready++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if pend != 2 || ready != 1200 {
		t.Fatalf("waiting: %d pending %d ready, want 2 and 1200", pend, ready)
	}
	n, err := e.s.CancelWhere(e.ctx, queue.Filter{State: task.Pending}, "op")
	if err != nil || n != 2 {
		t.Fatalf("cancel pending: %d %v", n, err)
	}
	// Claim priority 0 first, aging aside.
	ts := e.claim("cpu", 1000)
	if len(ts) != 1000 || ts[0].Priority != 0 {
		t.Fatalf("claimed %d, first prio %d", len(ts), ts[0].Priority)
	}
	if c, _ := e.s.Counts(e.ctx); c.Ready != 200 || c.Running != 1000 || c.Pending != 0 {
		t.Fatalf("counts after claim %+v", c)
	}
}

func TestPinnedDelayedBackpressure(t *testing.T) {
	e := newEnv(t)
	low := e.submit("cpu", delay(time.Second), prio(4))
	crit := e.submit("cpu", delay(time.Second), prio(4), func(s *task.Spec) { s.Critical = true })
	high := e.submit("cpu", delay(time.Second), prio(1))
	e.clock.Advance(2 * time.Second)
	res, err := e.s.Promote(e.ctx, leader, 100, queue.PromoteOptions{Readmit: -1, HotPools: []string{"cpu"}, Spread: 10 * time.Second})
	if err != nil || res.Ready != 2 || res.Deferred != 1 {
		t.Fatalf("hot promote: %+v %v, want 2 ready (critical, prio 1), 1 deferred", res, err)
	}
	for id, want := range map[string]task.State{low: task.Pending, crit: task.Ready, high: task.Ready} {
		if st := e.state(id); st != want {
			t.Fatalf("%s: %s, want %s", id, st, want)
		}
	}
	tk, _ := e.s.Get(e.ctx, low)
	if tk.Reason != task.ReasonDeferred || tk.DueAt == nil || !tk.DueAt.After(e.clock.Now()) {
		t.Fatalf("deferred task: %s due %v", tk.Reason, tk.DueAt)
	}
	// Cooled down: the deferred task goes on as an ordinary delayed task.
	e.clock.Advance(11 * time.Second)
	if res, err = e.s.Promote(e.ctx, leader, 100); err != nil || res.Ready != 1 {
		t.Fatalf("cool promote: %+v %v", res, err)
	}
	if st := e.state(low); st != task.Ready {
		t.Fatalf("low after cooling: %s", st)
	}
	if c, _ := e.s.Counts(e.ctx); c.Ready != 3 || c.Pending != 0 || c.ReadyBy["cpu"][4] != 2 {
		t.Fatalf("counts %+v", c)
	}
}

func TestPinnedDelayedDrain(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu", delay(time.Second))
	e.clock.Advance(2 * time.Second)
	if _, err := e.s.Promote(e.ctx, leader, 100); err != nil {
		t.Fatal(err)
	}
	n, err := e.s.Drain(e.ctx, []queue.DrainMove{{ID: id, Region: "us-east", Pool: "cpu"}})
	if err != nil || n != 1 {
		t.Fatalf("drain: %d %v", n, err)
	}
	tk, _ := e.s.Get(e.ctx, id)
	if tk.State != task.Pending || tk.HandOffTarget != "us-east" {
		t.Fatalf("drained: %s target %q", tk.State, tk.HandOffTarget)
	}
	if ts := e.claim("cpu", 10); len(ts) != 0 {
		t.Fatalf("drained task claimed")
	}
}

// Unplaced tasks submitted with a delay wait in dn and move to the due set
// at promotion without their records being read; they stay PENDING until
// placed. Cancel finds them there; promotion is bounded and reports the
// next due time.
func TestUnplacedDelayedThroughDueSet(t *testing.T) {
	e := newEnv(t, oneShard) // the bounds are per shard
	var batch []queue.NewTask
	for i := 0; i < 1100; i++ {
		batch = append(batch, queue.NewTask{Spec: e.spec(delay(time.Second))})
	}
	for start := 0; start < len(batch); start += queue.MaxBatch {
		if _, err := e.s.Submit(e.ctx, batch[start:min(start+queue.MaxBatch, len(batch))]...); err != nil {
			t.Fatal(err)
		}
	}
	gone := e.submit("", delay(time.Second))
	later := e.submit("", delay(time.Hour))
	if st, err := e.s.Cancel(e.ctx, gone, "", "op"); err != nil || st != task.Canceled {
		t.Fatalf("cancel while delayed: %s %v", st, err)
	}
	e.clock.Advance(2 * time.Second)
	first, err := e.s.Promote(e.ctx, leader, 600)
	if err != nil || first.Moved != 600 || first.Ready != 0 {
		t.Fatalf("first pass: %+v %v", first, err)
	}
	second, err := e.s.Promote(e.ctx, leader, 1000)
	if err != nil || second.Moved != 500 {
		t.Fatalf("second pass: %+v %v", second, err)
	}
	if want := e.clock.Now().Add(time.Hour - 2*time.Second).Truncate(time.Millisecond); !second.NextDue.Equal(want) {
		t.Fatalf("next due %v, want %v", second.NextDue, want)
	}
	placed := 0
	for {
		due, err := e.s.DueTasks(e.ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		var as []queue.Assignment
		for _, x := range due {
			if x.ID == gone || x.State != task.Pending {
				t.Fatalf("due: %s %s", x.ID, x.State)
			}
			as = append(as, queue.Assignment{ID: x.ID, Pool: "cpu"})
		}
		res, err := e.s.Place(e.ctx, leader, as)
		if err != nil || res.Placed != len(as) {
			t.Fatalf("place: %+v %v", res, err)
		}
		placed += res.Placed
	}
	if placed != 1100 {
		t.Fatalf("placed %d, want 1100", placed)
	}
	c, _ := e.s.Counts(e.ctx)
	if c.Ready != 1100 || c.Pending != 1 {
		t.Fatalf("counts %+v", c)
	}
	if st := e.state(later); st != task.Pending {
		t.Fatalf("the task due in an hour: %s", st)
	}
	var pend int
	_ = e.s.Waiting(e.ctx, queue.Filter{State: task.Pending}, func(ts []*task.Task) error { pend += len(ts); return nil })
	if pend != 1 {
		t.Fatalf("waiting pending: %d, want 1", pend)
	}
}

// DueTasks reads what placement needs of a due task: its price cap and
// wait target too, so DAG nodes, schedule slots and delayed tasks are
// placed within their max_price_per_slot_hour.
func TestDueTasksCarryPriceCapAndWaitTarget(t *testing.T) {
	e := newEnv(t)
	id := e.submit("", func(s *task.Spec) {
		s.MaxPricePerSlotHour, s.MaxWait = 0.03, task.Duration(4*time.Second)
	})
	due, err := e.s.DueTasks(e.ctx, 10)
	if err != nil || len(due) != 1 || due[0].ID != id {
		t.Fatalf("due %v %v, want %s", due, err, id)
	}
	if d := due[0]; d.MaxPricePerSlotHour != 0.03 || time.Duration(d.MaxWait) != 4*time.Second {
		t.Fatalf("due task: max_price_per_slot_hour %v, max_wait %v; want 0.03 and 4s", d.MaxPricePerSlotHour, d.MaxWait)
	}
}

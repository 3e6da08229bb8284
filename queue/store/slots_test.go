package store_test

import (
	"testing"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

func slotsOf(v task.Slots) func(*task.Spec) { return func(s *task.Spec) { s.Slots = v } }

// claimRoom claims up to n tasks of pool that fit room (milli-slots).
func (e *env) claimRoom(pool string, n, room int) queue.Claimed {
	e.t.Helper()
	c, err := e.s.ClaimTasks(e.ctx, queue.ClaimRequest{Pool: pool, Worker: "w1", N: n, Room: room})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func milliOf(ts []*task.Task) int {
	m := 0
	for _, t := range ts {
		m += t.SlotMilli()
	}
	return m
}

// A claim with room takes tasks whose slots fit it together, in order:
// one slot's room runs four quarter tasks, and a whole task behind them
// waits, in its place, until a whole slot is free (no quarter task behind
// it jumps it). A claim without room counts each task one of N, as
// before. The record keeps the task's slots.
func TestClaimFitsRoom(t *testing.T) {
	e := newEnv(t, oneShard)
	var quarters []string
	for range 4 {
		quarters = append(quarters, e.submit("p", slotsOf(0.25)))
	}
	whole := e.submit("p")
	e.submit("p", slotsOf(0.25))
	e.submit("p", slotsOf(0.25))

	if tk, err := e.s.Get(e.ctx, quarters[0]); err != nil || tk.Slots != 0.25 || tk.SlotMilli() != 250 {
		t.Fatalf("stored: %+v %v, want slots 0.25", tk, err)
	}
	if tk, err := e.s.Get(e.ctx, whole); err != nil || tk.Slots != 0 || tk.SlotMilli() != task.MilliSlots {
		t.Fatalf("stored whole: %v %v", tk.Slots, err)
	}
	c := e.claimRoom("p", 32, 1000)
	if len(c.Tasks) != 4 || !c.Full || milliOf(c.Tasks) != 1000 {
		t.Fatalf("one slot: claimed %d (%d milli), full %v; want the 4 quarters, full", len(c.Tasks), milliOf(c.Tasks), c.Full)
	}
	for i, tk := range c.Tasks {
		if tk.ID != quarters[i] || tk.Slots != 0.25 {
			t.Fatalf("claimed %d: %s slots %v, want %s", i, tk.ID, tk.Slots, quarters[i])
		}
	}
	running := c.Tasks
	e.complete(running[0])
	running = running[1:]
	if c := e.claimRoom("p", 32, 250); len(c.Tasks) != 0 || !c.Full {
		t.Fatalf("a quarter free before a whole task: claimed %d, full %v; want none, full", len(c.Tasks), c.Full)
	}
	if st := e.state(whole); st != task.Ready {
		t.Fatalf("the whole task: %s, want READY", st)
	}
	e.complete(running...)
	c = e.claimRoom("p", 32, 1000)
	if len(c.Tasks) != 1 || c.Tasks[0].ID != whole || !c.Full {
		t.Fatalf("a slot free: claimed %v, full %v; want the whole task", c.Tasks, c.Full)
	}
	// Room enough for both quarters, and not full.
	c = e.claimRoom("p", 32, 3000)
	if len(c.Tasks) != 2 || c.Full {
		t.Fatalf("3 slots: claimed %d, full %v; want the last 2 quarters, not full", len(c.Tasks), c.Full)
	}
	// N still bounds the count.
	for range 3 {
		e.submit("p", slotsOf(0.1))
	}
	if c := e.claimRoom("p", 2, 1000); len(c.Tasks) != 2 || c.Full {
		t.Fatalf("N 2: claimed %d, full %v", len(c.Tasks), c.Full)
	}
	// Without room: one of N each, whatever its slots.
	if ts := e.claim("p", 5); len(ts) != 1 {
		t.Fatalf("without room: claimed %d, want the last 1", len(ts))
	}
}

// Room holds with limits on (the claim reads each record for its keys
// and its slots) and across shards: a capacity window of 3 slots still
// counts tasks, and the room caps what the window allows.
func TestClaimRoomWithWindowAndShards(t *testing.T) {
	e := newEnv(t)
	e.setLimits(queue.Limit{Kind: queue.LimitPool, Name: "p", Concurrency: 3})
	for range 8 {
		e.submit("p", slotsOf(0.5))
	}
	c := e.claimRoom("p", 32, 1000)
	if len(c.Tasks) != 2 || milliOf(c.Tasks) != 1000 {
		t.Fatalf("room 1000 with a window of 3: claimed %d (%d milli), want 2", len(c.Tasks), milliOf(c.Tasks))
	}
	c2 := e.claimRoom("p", 32, 5000)
	if len(c2.Tasks) != 1 {
		t.Fatalf("the window's third: claimed %d, want 1", len(c2.Tasks))
	}
	e.complete(append(c.Tasks, c2.Tasks...)...)
	if st := e.limitState(queue.LimitPool, "p"); st.Running != 0 {
		t.Fatalf("window after completes: %+v", st)
	}
}

// A pool with a fair share draws tenants' tasks within the room too, and
// a task that does not fit stays in its tenant's set for a later claim.
func TestClaimRoomFairShare(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}, "b": {Weight: 1}}}})
	e.submitMany("p", "a", 3, slotsOf(0.5))
	e.submitMany("p", "b", 3, slotsOf(0.5))
	c := e.claimRoom("p", 32, 1000)
	if len(c.Tasks) != 2 || !c.Full {
		t.Fatalf("claimed %d, full %v; want 2, full", len(c.Tasks), c.Full)
	}
	seen := len(c.Tasks)
	for range 10 {
		e.complete(c.Tasks...)
		c = e.claimRoom("p", 32, 1000)
		seen += len(c.Tasks)
		if milliOf(c.Tasks) > 1000 {
			t.Fatalf("claimed %d milli in a room of 1000", milliOf(c.Tasks))
		}
		if len(c.Tasks) == 0 {
			break
		}
	}
	if seen != 6 {
		t.Fatalf("ran %d of the 6 tasks", seen)
	}
}

// The room, not N, bounds what a fair claim shares out: with 8 slots of
// room free at once and N 32, a tenant with a floor of 4 gets its 4 and the
// other tenant the rest, as if the 8 slots were claimed one by one,
// whichever tenant the claim draws first.
func TestClaimRoomFairShareFloor(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 3}, "b": {Weight: 1, Floor: 4}}}})
	e.submitMany("p", "a", 100)
	c := e.claimRoom("p", 32, 8000)
	if got := tenants(c.Tasks); got["a"] != 8 {
		t.Fatalf("a alone: claimed %v, want a 8", got)
	}
	e.submitMany("p", "b", 12)
	for range 3 {
		e.complete(c.Tasks...)
		c = e.claimRoom("p", 32, 8000)
		if got := tenants(c.Tasks); got["a"] != 4 || got["b"] != 4 {
			t.Fatalf("8 slots free: claimed %v, want b its floor 4, a 4", got)
		}
	}
}

// The pool's counters hold the slot units its RUNNING tasks take: four
// quarter tasks and a whole one are 5 tasks and 2 000 milli-slots, and
// each end (a success, a failure) gives back its own share.
func TestCountsRunningMilli(t *testing.T) {
	e := newEnv(t, oneShard)
	for range 4 {
		e.submit("p", slotsOf(0.25))
	}
	e.submit("p")
	c := e.claimRoom("p", 32, 2000)
	if len(c.Tasks) != 5 {
		t.Fatalf("claimed %d, want 5", len(c.Tasks))
	}
	want := func(tasks, milli int) {
		t.Helper()
		cs, err := e.s.Counts(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cs.RunningBy["p"] != tasks || cs.MilliBy["p"] != milli {
			t.Fatalf("running %d tasks, %d milli-slots; want %d, %d", cs.RunningBy["p"], cs.MilliBy["p"], tasks, milli)
		}
	}
	want(5, 2000)
	e.complete(c.Tasks[0])
	want(4, 1750)
	q := c.Tasks[1]
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: q.ID, Token: q.LeaseToken, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	want(3, 1500)
	e.complete(c.Tasks[4])
	want(2, 500)
	e.complete(c.Tasks[2:4]...)
	want(0, 0)
}

// Fair share counts slot units: two tenants of equal weight, one running
// tasks of an eighth of a slot, the other whole ones, each gets half of
// the room's slots (a 32 tasks, b 4), not half of its tasks; and when
// eight of a's tasks end (one slot), that slot is a's again: it holds 3
// slots to b's 4.
func TestFairShareCountsSlotUnits(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}, "b": {Weight: 1}}}})
	e.submitMany("p", "a", 100, slotsOf(0.125))
	e.submitMany("p", "b", 100)
	c := e.claimRoom("p", 64, 8000)
	if got := tenants(c.Tasks); got["a"] != 32 || got["b"] != 4 {
		t.Fatalf("8 slots free: claimed %v, want a 32 (4 slots), b 4 (4 slots)", got)
	}
	if fr, _ := e.s.FairRunning(e.ctx, "p"); fr["a"] != 4000 || fr["b"] != 4000 {
		t.Fatalf("running milli-slots %v, want a 4000, b 4000", fr)
	}
	var ofA []*task.Task
	for _, tk := range c.Tasks {
		if tk.Tenant == "a" && len(ofA) < 8 {
			ofA = append(ofA, tk)
		}
	}
	e.complete(ofA...)
	c = e.claimRoom("p", 64, 1000)
	if got := tenants(c.Tasks); got["a"] != 8 || got["b"] != 0 {
		t.Fatalf("a's slot freed: claimed %v, want a 8 (it holds 3 slots to b's 4)", got)
	}
}

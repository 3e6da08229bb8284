package store_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

func (e *env) setLanes(lanes map[string]queue.SlowLane) {
	e.t.Helper()
	if err := e.s.SetSlowLanes(e.ctx, leader, lanes); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) laneState(pool string) queue.LimitState {
	e.t.Helper()
	st, err := e.s.SlowLaneStatus(e.ctx, pool)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// laneTypes reads "<type> <tenant>" each.
func laneTypes(fs ...string) []queue.LaneType {
	out := make([]queue.LaneType, len(fs))
	for i, f := range fs {
		typ, tn, _ := strings.Cut(f, " ")
		out[i] = queue.LaneType{Type: typ, Tenant: tn}
	}
	return out
}

func byType(ts []*task.Task) map[string]int {
	m := map[string]int{}
	for _, t := range ts {
		m[t.Type]++
	}
	return m
}

// A pool's slow lane of 2 slots, with and without a fair share: slow tasks
// at the head of the pool never hold more than 2 slots while the quick ones
// behind them are claimed; the rest wait READY (one SLOW_LANE_FULL step
// however many claims find them, no attempt spent) and the next starts as
// one ends. A type not yet known slow whose task runs past the threshold is
// slow from that heartbeat on (its running tasks count in the lane), and
// quick again once the leader's learnt run times know it as quick.
func TestSlowLaneHoldsItsShare(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fair share"}[fair], func(t *testing.T) {
			e := newEnv(t, oneShard)
			if fair {
				e.setFair(map[string]queue.FairShare{"p": {Tenants: map[string]queue.TenantShare{"a": {Weight: 3}, "b": {Weight: 1}}}})
			}
			e.setLanes(map[string]queue.SlowLane{"p": {Threshold: time.Minute, Slots: 2, Slow: laneTypes("big a"), Known: laneTypes("big a", "small b")}})
			var big []string
			for range 6 {
				big = append(big, e.submit("p", typeOf("big"), tenantOf("a")))
			}
			for range 6 {
				e.submit("p", typeOf("small"), tenantOf("b"))
			}
			got := e.claim("p", 10)
			if d := cmp.Diff(map[string]int{"big": 2, "small": 6}, byType(got)); d != "" {
				t.Fatalf("first claim by type (-want +got):\n%s", d)
			}
			if again := e.claim("p", 10); len(again) != 0 {
				t.Fatalf("a claim with the lane full took %v", byType(again))
			}
			if d := cmp.Diff(queue.LimitState{Running: 2, Parked: 4}, e.laneState("p")); d != "" {
				t.Errorf("lane (-want +got):\n%s", d)
			}
			for _, id := range big[2:] {
				if st := e.state(id); st != task.Ready {
					t.Errorf("%s: %s past the lane, want READY", id, st)
				}
				if n := e.reasons(id)[task.ReasonSlowLaneFull]; n != 1 {
					t.Errorf("%s: %d SLOW_LANE_FULL steps, want 1", id, n)
				}
			}
			// One slow task ends: the next of them starts, one only.
			var held []*task.Task
			for _, tk := range got {
				if tk.Type == "big" {
					held = append(held, tk)
				}
			}
			e.complete(held[0])
			next := e.claim("p", 10)
			if len(next) != 1 || next[0].ID != big[2] || next[0].Attempts != 1 {
				t.Fatalf("after a slow task ended the claim took %v, want %s at attempt 1", next, big[2])
			}
			held = append(held[1:], next[0])

			// A type the leader does not know: 3 start with the lane full,
			// run past the threshold, and the heartbeat makes it slow.
			var fresh []*task.Task
			for range 3 {
				e.submit("p", typeOf("new"), tenantOf("b"))
			}
			fresh = e.claim("p", 10)
			if len(fresh) != 3 {
				t.Fatalf("claimed %d of the new type, want 3 (not known slow)", len(fresh))
			}
			e.clock.Advance(61 * time.Second)
			var leases []queue.Lease
			for _, tk := range append(held, fresh...) {
				leases = append(leases, queue.Lease{ID: tk.ID, Token: tk.LeaseToken})
			}
			if _, err := e.s.Heartbeat(e.ctx, "w1", "p", 10, queue.Types{}, leases); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(queue.LimitState{Running: 5, Parked: 3}, e.laneState("p")); d != "" {
				t.Errorf("lane after the heartbeat (-want +got):\n%s", d)
			}
			types, err := e.s.SlowTypes(e.ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(laneTypes("big a", "new b"), types); d != "" {
				t.Errorf("slow types (-want +got):\n%s", d)
			}
			// Heartbeats again: nothing counted twice.
			if _, err := e.s.Heartbeat(e.ctx, "w1", "p", 10, queue.Types{}, leases); err != nil {
				t.Fatal(err)
			}
			late := e.submit("p", typeOf("new"), tenantOf("b"))
			if got := e.claim("p", 10); len(got) != 0 {
				t.Fatalf("a claim with 5 slow running took %v", byType(got))
			}
			if n := e.reasons(late)[task.ReasonSlowLaneFull]; n != 1 {
				t.Errorf("the late new task: %d SLOW_LANE_FULL steps, want 1", n)
			}
			// Every slow task ends: the lane empties and the 4 parked start, 2 at a time.
			e.complete(append(held, fresh...)...)
			if d := cmp.Diff(queue.LimitState{}, e.laneState("p")); d != "" {
				t.Errorf("lane after every slow task ended (-want +got):\n%s", d)
			}
			if got := e.claim("p", 10); len(got) != 2 || got[0].ID != big[3] || got[1].ID != big[4] {
				t.Errorf("with the lane empty the claim took %v, want its 2 slots, in order", got)
			}
			// The leader learnt that new is quick: the parked one of it starts.
			e.setLanes(map[string]queue.SlowLane{"p": {Threshold: time.Minute, Slots: 2, Slow: laneTypes("big a"), Known: laneTypes("big a", "new b")}})
			e.clock.Advance(2 * time.Second)
			if got := e.claim("p", 10); len(got) != 1 || got[0].ID != late {
				t.Errorf("with new quick again the claim took %v, want the late new task", got)
			}
			// The lane goes: nothing is slow any more.
			e.setLanes(nil)
			if types, _ := e.s.SlowTypes(e.ctx, "p"); len(types) != 0 {
				t.Errorf("slow types of a pool without a lane: %v", types)
			}
		})
	}
}

// A type is slow for one tenant: tenant a's slow "big" holds a's tasks of
// it to the lane's 2 slots while b's tasks of big all start, and a task of
// a's running past the threshold makes the type slow for a only, so b's
// tasks of it go on starting past the lane.
func TestSlowLanePerTenant(t *testing.T) {
	e := newEnv(t, oneShard)
	e.setLanes(map[string]queue.SlowLane{"p": {Threshold: time.Minute, Slots: 2, Slow: laneTypes("big a"), Known: laneTypes("big a", "big b")}})
	for _, tn := range []string{"a", "b"} {
		for range 4 {
			e.submit("p", typeOf("big"), tenantOf(tn))
		}
	}
	if d := cmp.Diff(map[string]int{"a": 2, "b": 4}, tenants(e.claim("p", 10))); d != "" {
		t.Fatalf("claimed by tenant (-want +got):\n%s", d)
	}
	// a's "new" runs past the threshold: slow for a, not for b.
	e.submit("p", typeOf("new"), tenantOf("a"))
	first := e.claim("p", 10)
	if len(first) != 1 {
		t.Fatalf("claimed %d of a's new type, want 1", len(first))
	}
	e.clock.Advance(61 * time.Second)
	if _, err := e.s.Heartbeat(e.ctx, "w1", "p", 10, queue.Types{}, []queue.Lease{{ID: first[0].ID, Token: first[0].LeaseToken}}); err != nil {
		t.Fatal(err)
	}
	types, err := e.s.SlowTypes(e.ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(laneTypes("big a", "new a"), types); d != "" {
		t.Errorf("slow types (-want +got):\n%s", d)
	}
	for _, tn := range []string{"a", "b"} {
		for range 3 {
			e.submit("p", typeOf("new"), tenantOf(tn))
		}
	}
	if d := cmp.Diff(map[string]int{"b": 3}, tenants(e.claim("p", 10))); d != "" {
		t.Errorf("with the lane full of a's, claimed by tenant (-want +got):\n%s", d)
	}
}

// A lane of 2 slots on 3 shards (a task's shard is chosen at submit, a
// claim sees one shard at a time): the shards' parts add up to 2, never
// one each, a shard without one keeps its slow tasks parked, and the slots
// follow the slow work each time the leader writes the lanes, so every
// slow task runs, never more than 2 at once.
func TestSlowLaneSplitAcrossShards(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	lanes := map[string]queue.SlowLane{"p": {Threshold: time.Minute, Slots: 2, Slow: laneTypes("big default"), Known: laneTypes("big default")}}
	if !e.s.SlowLanesMove(lanes) {
		t.Error("a lane of 2 slots on 3 shards: SlowLanesMove false, want true")
	}
	if e.s.SlowLanesMove(nil) {
		t.Error("no lane on 3 shards: SlowLanesMove true, want false")
	}
	e.setLanes(lanes)
	total := e.submitOnEveryShard("p", typeOf("big"))
	parts := func() int { return e.laneParts("p") }
	var running []*task.Task
	done, peak := 0, 0
	for round := 0; done < total && round < 4*total; round++ {
		running = append(running, e.claim("p", 10)...)
		if len(running) > 2 {
			t.Fatalf("round %d: %d slow tasks running, the lane has 2 slots", round, len(running))
		}
		if st := e.laneState("p"); st.Running != len(running) || st.Running+st.Parked != total-done {
			t.Fatalf("round %d: lane %+v, want %d running, %d parked", round, st, len(running), total-done-len(running))
		}
		peak = max(peak, len(running))
		if len(running) > 0 {
			e.complete(running[0])
			running = running[1:]
			done++
		}
		e.clock.Advance(1100 * time.Millisecond) // parked tasks are looked at again
		e.setLanes(lanes)
		if p := parts(); p != 2 {
			t.Fatalf("round %d: the shards' parts of the lane add up to %d, want 2", round, p)
		}
	}
	if done != total {
		t.Fatalf("%d of %d slow tasks ran", done, total)
	}
	if peak != 2 {
		t.Errorf("at most %d slow tasks ran at once, want the lane's 2", peak)
	}
}

// submitOnEveryShard submits tasks (mod) into pool until each of the 3
// shards holds at least 3 of them (at most 100), and returns how many.
func (e *env) submitOnEveryShard(pool string, mod ...func(*task.Spec)) int {
	e.t.Helper()
	per, total := map[int]int{}, 0
	for total < 100 && (len(per) < 3 || slices.Min(slices.Collect(maps.Values(per))) < 3) {
		id := e.submit(pool, mod...)
		sh, err := e.s.ShardOf(id)
		if err != nil {
			e.t.Fatal(err)
		}
		per[sh]++
		total++
	}
	if len(per) < 3 {
		e.t.Fatalf("%d tasks landed on %d shards, want 3", total, len(per))
	}
	return total
}

// A lane of 6 slots on 3 shards whose slow tasks are all on one shard
// (handed off from a one-shard region): the lane's parts move to that
// shard, so its slow tasks hold 6, never 7, the parts adding up to 6 after
// every round; when the slow work moves to another shard, its slots follow.
func TestSlowLaneFollowsWorkOverShards(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	lanes := map[string]queue.SlowLane{"p": {Threshold: time.Minute, Slots: 6, Slow: laneTypes("big default"), Known: laneTypes("big default")}}
	e.setLanes(lanes)
	parts := func() int { return e.laneParts("p") }
	first := e.handedOff("p", 0, 18, typeOf("big"))
	var second []string
	onSecond := map[string]bool{}
	var running []*task.Task
	done, peak, peakSecond := 0, 0, 0
	for round := 0; done < 42 && round < 80; round++ {
		e.clock.Advance(1100 * time.Millisecond) // parked tasks are looked at again
		e.setLanes(lanes)
		if p := parts(); p != 6 {
			t.Fatalf("round %d: the shards' parts of the lane add up to %d, want 6", round, p)
		}
		running = append(running, e.claim("p", 10)...)
		if len(running) > 6 {
			t.Fatalf("round %d: %d slow tasks running, the lane has 6 slots", round, len(running))
		}
		if st := e.laneState("p"); st.Running != len(running) {
			t.Fatalf("round %d: the lane counts %d running, want %d", round, st.Running, len(running))
		}
		peak = max(peak, len(running))
		n := 0
		for _, tk := range running {
			if onSecond[tk.ID] {
				n++
			}
		}
		peakSecond = max(peakSecond, n)
		if round == 1 && peak != 6 {
			t.Errorf("after 2 rounds the slow tasks held at most %d slots with 18 waiting, want the lane's 6", peak)
		}
		if second == nil && len(running) == 6 {
			second = e.handedOff("p", 1, 24, typeOf("big")) // the slow work moves to shard 1
			for _, id := range second {
				onSecond[id] = true
			}
		}
		k := min(2, len(running))
		e.complete(running[:k]...)
		running, done = running[k:], done+k
	}
	if done != len(first)+len(second) {
		t.Fatalf("%d of %d slow tasks ran", done, len(first)+len(second))
	}
	if peak != 6 || peakSecond != 6 {
		t.Errorf("the slow tasks held at most %d slots (%d of those on shard 1), want the lane's 6 (6)", peak, peakSecond)
	}
}

// laneParts is what the shards' parts of pool's slow lane add up to.
func (e *env) laneParts(pool string) int {
	e.t.Helper()
	sum := 0
	for i := range e.s.Shards() {
		v, _ := e.rdb.HGet(e.ctx, e.s.Prefix(i)+"sln", pool).Result()
		var thr, n int
		fmt.Sscanf(v, "%d %d", &thr, &n)
		sum += n
	}
	return sum
}

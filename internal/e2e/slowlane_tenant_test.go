package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// A type is slow for one tenant only (docs/fairness.md): two regions of two
// servers, auth on; eu-west-1's pool lane (8 slots, a slow lane of 2,
// threshold 500 ms). team-a's sleep handler runs 1.5 s, so sleep is slow
// for team-a: its next four sleep tasks of 3 s run two at a time. team-b's
// sleep tasks take 50 ms (one handed off from us-east-1), submitted while
// two of team-a's wait parked: none of them waits for the lane (no
// SLOW_LANE_FULL step, every one started before team-a's parked ones), and
// the lane knows sleep as slow for team-a and never for team-b.
func TestSlowLanePerTenant(t *testing.T) {
	testenv.Slow(t)
	fed := newFederation(t, fedOpts{servers: 2, noWorkers: true,
		pools: map[string]string{"eu-west-1": `- name: lane
  tags: {class: lane}
  slots: 8
  price_per_slot_hour: 1
  slow_lane: {threshold: 500ms, max_share: 0.25}`}})
	fed.startWorker("us-east-1", "cpu")
	fed.startWorker("eu-west-1", "lane", "--concurrency", "8")
	fed.waitPlaceable()
	r := fed.region("eu-west-1")
	ctx := context.Background()
	sleep := func(ms int) map[string]any {
		return map[string]any{"type": "sleep", "tags": map[string]string{"class": "lane"}, "regions": []string{"eu-west-1"},
			"payload": map[string]int{"ms": ms}}
	}
	slowFor := func() []queue.LaneType {
		ts, err := r.store.Tasks().SlowTypes(ctx, "lane")
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	aSleep := queue.LaneType{Type: "sleep", Tenant: "team-a"}
	first, _ := fed.submit("eu-west-1", tokSubmitterA, sleep(1500))
	fed.waitState("eu-west-1", tokSubmitterA, first, task.Success, 30*time.Second)
	waitUntil(t, 15*time.Second, "sleep slow for team-a in pool lane", func() bool {
		return slices.Contains(slowFor(), aSleep)
	})

	var slowA []string
	for range 4 {
		id, _ := fed.submit("eu-west-1", tokSubmitterA, sleep(3000))
		slowA = append(slowA, id)
	}
	waitUntil(t, 15*time.Second, "two of team-a's sleep tasks parked behind the lane", func() bool {
		st, err := r.store.Tasks().SlowLaneStatus(ctx, "lane")
		return err == nil && st.Parked == 2
	})
	handed := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterB, sleep(50))
	quickB := []string{handed.ID}
	for range 9 {
		id, _ := fed.submit("eu-west-1", tokSubmitterB, sleep(50))
		quickB = append(quickB, id)
	}
	var bStarted time.Time
	for _, id := range quickB {
		tk := fed.waitState("eu-west-1", tokSubmitterB, id, task.Success, 30*time.Second)
		if tk.StartedAt != nil && tk.StartedAt.After(bStarted) {
			bStarted = *tk.StartedAt
		}
		if tk.Attempts != 1 {
			t.Errorf("team-b's %s: %d attempts, want 1", id, tk.Attempts)
		}
		for _, s := range fed.trail("eu-west-1", tokSubmitterB, id) {
			if s.Reason == task.ReasonSlowLaneFull {
				t.Errorf("team-b's sleep task %s waited for the lane team-a's sleep is slow in", id)
			}
		}
	}
	fed.waitState("us-east-1", tokSubmitterB, handed.ID, task.Success, 20*time.Second)
	var aStarts []time.Time
	for _, id := range slowA {
		tk := fed.waitState("eu-west-1", tokSubmitterA, id, task.Success, 30*time.Second)
		if tk.StartedAt == nil {
			t.Fatalf("team-a's %s: no start", id)
		}
		aStarts = append(aStarts, *tk.StartedAt)
	}
	slices.SortFunc(aStarts, func(a, b time.Time) int { return a.Compare(b) })
	// the third start: the first of team-a's that waited for the lane
	parked := aStarts[2]
	t.Logf("team-b's 10 quick sleep tasks all started %s before team-a's first parked one", parked.Sub(bStarted).Round(time.Millisecond))
	if !bStarted.Before(parked) {
		t.Errorf("team-b's last sleep task started at %s, after team-a's first parked one (%s): it waited behind team-a's lane",
			bStarted.Format(time.StampMilli), parked.Format(time.StampMilli))
	}
	for _, lt := range slowFor() {
		if lt.Tenant == "team-b" {
			t.Errorf("pool lane holds %+v slow: team-b's sleep tasks take 50 ms", lt)
		}
	}
}

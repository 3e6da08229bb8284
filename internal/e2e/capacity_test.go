package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// A pool whose capacity window lends 3 slots, served by a worker of 20,
// runs 3 tasks at once and never 4: claims count the window (the leader
// writes it into the region's Redis), not only placement. Tasks handed off
// from us-east-1 (two regions of two servers, auth on) through both of
// its servers fill eu-west-1's windowed pool; its leader is killed
// halfway, and the next leader's claims hold the window as well.
func TestCapacityWindowNeverRunsMore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a federation of real processes")
	}
	const window = 3
	fed := newFederation(t, fedOpts{servers: 2, ownEtcd: true, noWorkers: true, pools: map[string]string{"eu-west-1": `- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}
- {name: gpu, tags: {class: gpu}, slots: 50, price_per_slot_hour: 0.9, tenants: [team-b],
   capacity_schedule: {timezone: UTC, windows: [{start: "00:00", end: "24:00", slots: 3}]}}`}})
	fed.startWorker("us-east-1", "cpu")
	fed.startWorker("eu-west-1", "cpu")
	fed.startWorker("eu-west-1", "gpu")
	fed.waitPlaceable()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eu := fed.region("eu-west-1")
	spec := map[string]any{"type": "sleep", "tags": map[string]string{"class": "gpu"}, "payload": map[string]int{"ms": 1500}}
	var ids []string
	waitUntil(t, 30*time.Second, "a task of the gpu pool placed in eu-west-1", func() bool {
		id, where := fed.submit("us-east-1", tokSubmitterB, spec)
		if where == "eu-west-1" {
			ids = append(ids, id)
		}
		return where == "eu-west-1"
	})
	us := fed.region("us-east-1").servers
	for i := range 17 {
		code, body := fed.callAPI(us[i%len(us)].api, tokSubmitterB, http.MethodPost, "/v1/tasks", spec)
		if code == http.StatusTooManyRequests {
			time.Sleep(time.Second)
			continue
		}
		if code != http.StatusCreated {
			t.Fatalf("submit %d: %d %s", i, code, body)
		}
		ids = append(ids, jsonID(t, body))
	}
	peak, samples, killed := 0, 0, false
	done := func() bool {
		for _, id := range ids {
			if tk, code := fed.getTask("us-east-1", tokSubmitterB, id); code != http.StatusOK || tk.State != task.Success {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("the %d tasks did not all succeed within 2 min", len(ids))
		}
		for range 20 {
			c, err := eu.store.Tasks().Counts(ctx)
			if err == nil {
				samples++
				peak = max(peak, c.RunningBy["gpu"])
				if c.RunningBy["gpu"] > window {
					t.Fatalf("eu-west-1's gpu pool runs %d tasks at once in a window of %d", c.RunningBy["gpu"], window)
				}
			}
			time.Sleep(25 * time.Millisecond)
		}
		if !killed && peak == window {
			for _, s := range eu.servers {
				if metric(t, s.api, "ax_region_leader") == 1 {
					s.kill()
					killed = true
					t.Logf("killed eu-west-1's leader %s", s.name)
					break
				}
			}
		}
	}
	t.Logf("%d tasks, window %d: at most %d running at once over %d samples; leader killed: %v", len(ids), window, peak, samples, killed)
	if peak != window {
		t.Errorf("at most %d ran at once, want the window's %d used", peak, window)
	}
	if !killed {
		t.Error("the leader was never killed: the case after a leader change was not walked")
	}
}

// jsonID is the id of a 201's task.
func jsonID(t *testing.T, body []byte) string {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.ID == "" {
		t.Fatalf("no task id in %s: %v", body, err)
	}
	return out.ID
}

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
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
	windowShown(t, fed, window)
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

// windowShown checks that GET /v1/regions, from a server of each region,
// and ax regions show eu-west-1's windowed gpu pool with the window's
// slots (its worker's apart, in worker_slots), not the worker's.
func windowShown(t *testing.T, fed *federation, window int) {
	t.Helper()
	for _, name := range []string{"us-east-1", "eu-west-1"} {
		code, body := fed.call(name, tokOperator, http.MethodGet, "/v1/regions", nil)
		if code != http.StatusOK {
			t.Fatalf("GET /v1/regions on %s: %d %s", name, code, body)
		}
		var res apiv1.RegionsResponse
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		var gpu *apiv1.PoolStatus
		for _, r := range res.Regions {
			for i, p := range r.Pools {
				if r.Name == "eu-west-1" && p.Name == "gpu" {
					gpu = &r.Pools[i]
				}
			}
		}
		switch {
		case gpu == nil:
			t.Fatalf("%s's /v1/regions has no eu-west-1/gpu: %s", name, body)
		case gpu.CapacityWindow == nil || !gpu.CapacityWindow.Open || gpu.CapacityWindow.Slots != window:
			t.Errorf("%s shows eu-west-1/gpu's window as %+v, want open with %d slots", name, gpu.CapacityWindow, window)
		case gpu.Slots != window || gpu.WorkerSlots <= window:
			t.Errorf("%s shows eu-west-1/gpu with slots %d, worker_slots %d: want the window's %d of the worker's more", name, gpu.Slots, gpu.WorkerSlots, window)
		}
	}
	cmd := exec.Command(axBin, "--api", fed.server("us-east-1").api, "--settings", "", "regions")
	cmd.Env = append(os.Environ(), "AX_TOKEN="+fed.token(tokOperator))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ax regions: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 7 && f[0] == "eu-west-1" && f[5] == "gpu" {
			if f[6] != strconv.Itoa(window) || f[7] != "of" {
				t.Errorf("ax regions shows eu-west-1/gpu's slots as %q, want %d of the worker's:\n%s", strings.Join(f[6:9], " "), window, out)
			}
			return
		}
	}
	t.Errorf("ax regions shows no eu-west-1/gpu:\n%s", out)
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

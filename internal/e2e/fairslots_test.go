package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatedHooks answers /hooks/<gate>/<tenant> once gate is opened, counting
// the calls of each tenant under way.
type gatedHooks struct {
	mu      sync.Mutex
	running map[string]int
	gates   map[string]chan struct{}
}

func (h *gatedHooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/hooks/"), "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	h.mu.Lock()
	gate := h.gates[parts[0]]
	h.running[parts[1]]++
	h.mu.Unlock()
	defer func() { h.mu.Lock(); h.running[parts[1]]--; h.mu.Unlock() }()
	select {
	case <-gate:
	case <-r.Context().Done():
	}
	_, _ = w.Write([]byte("ok"))
}

func (h *gatedHooks) now() (a, b int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running["team-a"], h.running["team-b"]
}

// Fair share in slot units through real processes (auth on, two regions):
// eu-west-1's pool frac (2 slots, one worker) is shared 1:1 by team-a,
// whose tasks take an eighth of a slot each (one handed off from
// us-east-1), and team-b, whose tasks take a whole slot. Once the slots
// free, each tenant holds one slot: team-a runs 8 tasks, team-b 1.
func TestFairShareInSlotUnits(t *testing.T) {
	hooks := &gatedHooks{running: map[string]int{}, gates: map[string]chan struct{}{"block": make(chan struct{}), "work": make(chan struct{})}}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	defer close(hooks.gates["work"])
	fed := newFederation(t, fedOpts{
		worker: fmt.Sprintf("http: {allow_prefixes: [%q], deny_private: false}\n", srv.URL+"/hooks/"),
		pools: map[string]string{"eu-west-1": `- {name: cpu, tags: {class: cpu}, slots: 8}
- name: frac
  tags: {class: frac}
  slots: 2
  queue_capacity: 1000
  fair_share: {tenants: {team-a: {weight: 1}, team-b: {weight: 1}}}`},
		noWorkers: true,
	})
	fed.startWorker("us-east-1", "cpu")
	fed.startWorker("eu-west-1", "cpu")
	fed.startWorker("eu-west-1", "frac", "--concurrency", "2")
	fed.waitPlaceable()
	spec := func(gate, tenant string, slots float64) map[string]any {
		sp := map[string]any{"type": "http", "tags": map[string]string{"class": "frac"}, "regions": []string{"eu-west-1"},
			"payload": map[string]any{"url": srv.URL + "/hooks/" + gate + "/" + tenant}}
		if slots < 1 {
			sp["slots"] = slots
		}
		return sp
	}
	// team-b holds both slots while the others are submitted, so they all
	// wait when the slots free.
	for range 2 {
		fed.submit("eu-west-1", tokSubmitterB, spec("block", "team-b", 1))
	}
	waitUntil(t, 30*time.Second, "team-b's two blockers running", func() bool { _, b := hooks.now(); return b == 2 })
	handed := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, spec("work", "team-a", 0.125))
	for range 19 {
		fed.submit("eu-west-1", tokSubmitterA, spec("work", "team-a", 0.125))
	}
	for range 20 {
		fed.submit("eu-west-1", tokSubmitterB, spec("work", "team-b", 1))
	}
	close(hooks.gates["block"])
	waitUntil(t, 30*time.Second, "team-a 8 tasks (one slot) and team-b 1 (one slot) running", func() bool {
		a, b := hooks.now()
		return a == 8 && b == 1
	})
	// It stays so: nothing else fits, and neither tenant passes its share.
	time.Sleep(time.Second)
	if a, b := hooks.now(); a != 8 || b != 1 {
		t.Fatalf("running team-a %d, team-b %d; want 8 and 1 (a slot each)", a, b)
	}
	if tk, code := fed.getTask("us-east-1", tokSubmitterA, handed.ID); code != http.StatusOK || tk.Slots != 0.125 {
		t.Fatalf("the handed-off task read from us-east-1: %d %+v", code, tk)
	}
}

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
)

// slotHooks is a hook server for the http handler that records how much of
// a worker's slots its calls held at once: a call to /hooks/q/… holds a
// quarter, any other a whole slot; each is answered after hold.
type slotHooks struct {
	hold time.Duration

	mu       sync.Mutex
	milli    int // held now
	most     int // the most held at once
	quarters int // quarter calls now
	mostQ    int // the most quarter calls at once
	calls    int
}

func (h *slotHooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	m, q := task.MilliSlots, 0
	if strings.HasPrefix(r.URL.Path, "/hooks/q/") {
		m, q = task.MilliSlots/4, 1
	}
	h.mu.Lock()
	h.calls++
	h.milli += m
	h.quarters += q
	h.most, h.mostQ = max(h.most, h.milli), max(h.mostQ, h.quarters)
	h.mu.Unlock()
	time.Sleep(h.hold)
	h.mu.Lock()
	h.milli -= m
	h.quarters -= q
	h.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (h *slotHooks) seen() (calls, most, mostQ int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, h.most, h.mostQ
}

// Fractional slots through real processes (docs/tasks.md "Fractional
// slots"): two regions of two servers with auth, tasks submitted in
// us-east-1 and handed off to eu-west-1's pool gpu, whose one `ax worker`
// has one slot. Tasks of slots 0.25 (through the API and `ax submit
// --slots`) run four at once on it, as the hook they call sees; a whole
// task among them runs alone, and the worker never holds more than its
// slot. Each task reads slots 0.25 through either region; slots 0 or 1.5
// is a 400 naming slots, and nothing is created. A remote worker (`ax
// worker --api`, one slot, pool rgpu) packs four quarter tasks the same
// way: the server hands it tasks that fit its slot.
func TestFractionalSlotsPackAHandedOffWorker(t *testing.T) {
	testenv.Slow(t)
	hooks := &slotHooks{hold: 700 * time.Millisecond}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	wtok := "wtok-" + randomHex(16)
	fed := newFederation(t, fedOpts{
		servers: 2,
		worker:  fmt.Sprintf("http: {allow_prefixes: [%q], deny_private: false}\n", srv.URL+"/hooks/"),
		pools: map[string]string{"eu-west-1": `- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}
- {name: gpu, tags: {class: gpu}, slots: 1, price_per_slot_hour: 2}
- {name: rgpu, tags: {class: rgpu}, slots: 1, price_per_slot_hour: 2}`,
			// worker tokens name pools every region declares
			"us-east-1": `- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}
- {name: rgpu, tags: {class: rgpu}, slots: 1, price_per_slot_hour: 2}`},
		unserved:  map[string][]string{"us-east-1": {"rgpu"}},
		tokens:    fmt.Sprintf("- {name: rgpu-workers, token_sha256: %s, role: worker, tenants: [team-a], pools: [rgpu]}", sha256Hex(wtok)),
		noWorkers: true,
	})
	fed.startWorker("us-east-1", "cpu")
	fed.startWorker("eu-west-1", "cpu")
	fed.startWorker("eu-west-1", "gpu", "--concurrency", "1")
	eu := fed.region("eu-west-1")
	tokenFile := filepath.Join(t.TempDir(), "worker-token")
	if err := os.WriteFile(tokenFile, []byte(wtok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fed.procs.start("eu-west-1/remote-rgpu", baseEnv(), "worker", "--api", eu.servers[0].api+","+eu.servers[1].api,
		"--token-file", tokenFile, "--pool", "rgpu", "--concurrency", "1", "--id", "remote-rgpu-1")
	fed.waitPlaceable()
	t.Run("remote worker", func(t *testing.T) { remotePacksQuarters(t, fed) })

	spec := func(path string, slots float64) map[string]any {
		sp := map[string]any{"type": "http", "tags": map[string]string{"class": "gpu"},
			"payload": map[string]any{"url": srv.URL + "/hooks/" + path}}
		if slots > 0 {
			sp["slots"] = slots
		}
		return sp
	}
	for _, bad := range []float64{0, 1.5, 0.0001} {
		sp := spec("q/bad", 0)
		sp["slots"], sp["regions"] = bad, []string{"eu-west-1"}
		code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", sp)
		if code != http.StatusBadRequest || !strings.Contains(string(body), `"field":"slots"`) {
			t.Fatalf("slots %v: %d %s, want 400 naming slots", bad, code, body)
		}
	}

	first := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, spec("q/0", 0.25))
	ids := []string{first.ID}
	for i := 1; i < 8; i++ {
		sp := spec(fmt.Sprintf("q/%d", i), 0.25)
		sp["regions"] = []string{"eu-west-1"}
		id, _ := fed.submit("us-east-1", tokSubmitterA, sp)
		ids = append(ids, id)
	}
	whole := spec("w", 0)
	whole["regions"] = []string{"eu-west-1"}
	wholeID, _ := fed.submit("us-east-1", tokSubmitterA, whole)
	out, stderr, code := runAx(t, fed.server("us-east-1").api, "--token", fed.token(tokSubmitterA), "submit", "--type", "http",
		"--tag", "class=gpu", "--region", "eu-west-1", "--slots", "0.25", "--payload", fmt.Sprintf(`{"url":%q}`, srv.URL+"/hooks/q/cli"))
	if code != 0 {
		t.Fatalf("ax submit --slots 0.25: exit %d: %s", code, stderr)
	}
	cliID := strings.TrimSpace(out)
	ids = append(ids, cliID)
	for i := 0; i < 3; i++ {
		sp := spec(fmt.Sprintf("q/late%d", i), 0.25)
		sp["regions"] = []string{"eu-west-1"}
		id, _ := fed.submit("us-east-1", tokSubmitterA, sp)
		ids = append(ids, id)
	}

	for _, id := range ids {
		for _, via := range []string{"us-east-1", "eu-west-1"} {
			tk := fed.waitState(via, tokSubmitterA, id, task.Success, 60*time.Second)
			if tk.Slots != 0.25 || tk.HeldBy != "eu-west-1" || tk.Attempts != 1 {
				t.Fatalf("%s via %s: slots %v, held by %s, %d attempts; want 0.25, eu-west-1, 1", id, via, tk.Slots, tk.HeldBy, tk.Attempts)
			}
		}
	}
	if tk := fed.waitState("us-east-1", tokSubmitterA, wholeID, task.Success, 60*time.Second); tk.Slots != 0 || tk.HeldBy != "eu-west-1" {
		t.Fatalf("the whole task: slots %v, held by %s", tk.Slots, tk.HeldBy)
	}
	out, _, code = runAx(t, fed.server("us-east-1").api, "--token", fed.token(tokSubmitterA), "get", cliID)
	if code != 0 || !strings.Contains(out, "Slots") || !strings.Contains(out, "0.25") {
		t.Fatalf("ax get %s (exit %d) shows no slots 0.25:\n%s", cliID, code, out)
	}
	calls, most, mostQ := hooks.seen()
	t.Logf("%d calls; at most %d milli-slots and %d quarter tasks at once", calls, most, mostQ)
	if calls != len(ids)+1 {
		t.Fatalf("the hook saw %d calls, want %d (each task once)", calls, len(ids)+1)
	}
	if most > task.MilliSlots {
		t.Fatalf("the worker of one slot held %d milli-slots at once", most)
	}
	if mostQ != 4 {
		t.Fatalf("at most %d quarter tasks ran at once on one slot, want 4", mostQ)
	}
}

// remotePacksQuarters: 8 sleep tasks of slots 0.25 handed off to pool
// rgpu, whose one remote worker has one slot. The server counts a task
// held from its claim until its outcome is recorded, so the tasks' records
// (started_at to finished_at, both by eu-west-1's Redis clock) overlap at
// most four at a time; four did.
func remotePacksQuarters(t *testing.T, fed *federation) {
	var ids []string
	for range 8 {
		id, _ := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "sleep", "payload": map[string]int{"ms": 1200},
			"tags": map[string]string{"class": "rgpu"}, "regions": []string{"eu-west-1"}, "slots": 0.25})
		ids = append(ids, id)
	}
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, id := range ids {
		tk := fed.waitState("us-east-1", tokSubmitterA, id, task.Success, 60*time.Second)
		if tk.Slots != 0.25 || tk.HeldBy != "eu-west-1" || tk.Attempts != 1 || tk.StartedAt == nil || tk.FinishedAt == nil {
			t.Fatalf("%s: %+v", id, tk)
		}
		edges = append(edges, edge{*tk.StartedAt, 1}, edge{*tk.FinishedAt, -1})
	}
	// An end before a start at the same millisecond: the slot was free.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	now, most := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	t.Logf("remote worker of one slot: at most %d quarter tasks at once", most)
	if most != 4 {
		t.Fatalf("at most %d quarter tasks ran at once on the remote worker's slot, want 4", most)
	}
}

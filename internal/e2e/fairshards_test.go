package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
)

// tenantHooks counts the calls the http handler makes, by path: how many
// run now, the most at once and when each ran; each call holds its slot
// exactly 300 ms, so tasks claimed together end together and the next
// claims come in bursts (a floor must hold through those too).
type tenantHooks struct {
	mu      sync.Mutex
	calls   map[string]int
	running map[string]int
	most    map[string]int
	spans   map[string][][2]time.Time
}

func newTenantHooks() *tenantHooks {
	return &tenantHooks{calls: map[string]int{}, running: map[string]int{}, most: map[string]int{}, spans: map[string][][2]time.Time{}}
}

func (h *tenantHooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	p := r.URL.Path
	h.mu.Lock()
	h.calls[p]++
	h.running[p]++
	h.most[p] = max(h.most[p], h.running[p])
	h.mu.Unlock()
	start := time.Now()
	time.Sleep(300 * time.Millisecond)
	h.mu.Lock()
	h.running[p]--
	h.spans[p] = append(h.spans[p], [2]time.Time{start, time.Now()})
	h.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (h *tenantHooks) of(path string) (calls, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[path], h.most[path]
}

// below is, from the first time floor of path's calls ran at once (the
// leader's round moved the floor's parts to their shard) to the start of
// its last call, the share of the time fewer than floor ran (its later
// calls waiting meanwhile), and the longest such stretch; 1 when floor
// never ran at once.
func (h *tenantHooks) below(path string, floor int) (share float64, longest time.Duration) {
	h.mu.Lock()
	spans := slices.Clone(h.spans[path])
	h.mu.Unlock()
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	var to time.Time
	for _, sp := range spans {
		evs = append(evs, ev{sp[0], 1}, ev{sp[1], -1})
		to = maxTime(to, sp[0])
	}
	slices.SortFunc(evs, func(a, b ev) int { return a.at.Compare(b.at) })
	var from, last time.Time
	var short, stretch time.Duration
	n := 0
	for _, e := range evs {
		if e.at.After(to) {
			break
		}
		if !from.IsZero() && n < floor {
			d := e.at.Sub(last)
			short, stretch = short+d, stretch+d
			longest = max(longest, stretch)
		}
		n += e.d
		if n >= floor {
			stretch = 0
			if from.IsZero() {
				from = e.at
			}
		}
		last = e.at
	}
	if from.IsZero() || !to.After(from) {
		return 1, 0
	}
	return float64(short) / float64(to.Sub(from)), longest
}

// spansOf lists path's calls, from and to, in ms after its first call.
func (h *tenantHooks) spansOf(path string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, sp := range h.spans[path] {
		t0 := h.spans[path][0][0]
		fmt.Fprintf(&b, " %d-%d", sp[0].Sub(t0).Milliseconds(), sp[1].Sub(t0).Milliseconds())
	}
	return b.String()
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Fair-share floors and maxes on a 3-shard region through real processes
// (docs/fairness.md "Shards"): us-east-1 keeps its tasks over 3 shards of
// its Redis; eu-west-1 has one shard and no pool of these classes, so what
// is submitted there for them is handed off to us-east-1 under its id of
// shard 0 — every such task on the same shard of us-east-1.
//   - pool fair (6 slots): team-a's max of 3, its 12 tasks all handed
//     off: 3 run at once (a fixed split gave 1 a shard: 1 at once), never
//     4, and every one succeeds;
//   - pool floor (4 slots): team-b's floor of 2 (below the shard count)
//     while team-a, weighted 1000, floods the pool from every shard with
//     100 tasks: team-b's 10 handed-off tasks run 2 at once (without the
//     floor 1: its score at 0 running beats team-a's, at 1 it does not),
//     never a third, and all succeed while team-a's flood still waits;
//     every call lasting 300 ms, team-b's two end together, and the
//     worker claims their slots at once: they go to team-b again, as its
//     worker records the completions before it claims and the claim
//     starts on the shard the completion left a floor owed (team-b below
//     2 no longer than a slot takes to change hands).
func TestFairShareOverShards(t *testing.T) {
	testenv.Slow(t)
	hooks := newTenantHooks()
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	fed := newFederation(t, fedOpts{
		worker: fmt.Sprintf("http: {allow_prefixes: [%q], deny_private: false}\n", srv.URL+"/hooks/"),
		shards: map[string]int{"us-east-1": 3},
		pools: map[string]string{"us-east-1": `- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}
- name: fair
  tags: {class: fair}
  slots: 6
  price_per_slot_hour: 1
  fair_share: {tenants: {team-a: {max: 3}}}
- name: floor
  tags: {class: floor}
  slots: 4
  price_per_slot_hour: 1
  fair_share: {tenants: {team-a: {weight: 1000}, team-b: {floor: 2}}}`},
		noWorkers: true,
	})
	fed.startWorker("us-east-1", "cpu")
	fed.startWorker("eu-west-1", "cpu")
	fed.startWorker("us-east-1", "fair", "--concurrency", "6")
	fed.startWorker("us-east-1", "floor", "--concurrency", "4")
	fed.waitPlaceable()

	t.Run("a max of 3 over 3 shards, every task handed off", func(t *testing.T) {
		fed := fed.on(t)
		ids := handOffToShard0(t, fed, tokSubmitterA, hookSpec(srv.URL, "fair", "max/a"), 12)
		settleAll(fed, "eu-west-1", tokSubmitterA, ids, 60*time.Second)
		calls, most := hooks.of("/hooks/max/a")
		t.Logf("team-a in pool fair: %d calls, at most %d at once (max 3)", calls, most)
		if most > 3 {
			t.Errorf("team-a ran %d at once in pool fair, its max is 3", most)
		}
		if most < 3 {
			t.Errorf("team-a ran at most %d at once with 12 handed-off tasks waiting, want its max of 3", most)
		}
		if calls != len(ids) {
			t.Errorf("the hook saw %d calls of team-a's %d tasks", calls, len(ids))
		}
	})

	t.Run("a floor of 2 over 3 shards while another tenant floods", func(t *testing.T) {
		fed := fed.on(t)
		// team-a's flood straight into us-east-1: over its 3 shards.
		var flood []string
		for range 100 {
			id, where := fed.submit("us-east-1", tokSubmitterA, hookSpec(srv.URL, "floor", "floor/a"))
			if where != "us-east-1" {
				t.Fatalf("task %s placed in %s, want us-east-1", id, where)
			}
			flood = append(flood, id)
		}
		waitUntil(t, 20*time.Second, "team-a's flood holding pool floor's 4 slots", func() bool {
			hooks.mu.Lock()
			defer hooks.mu.Unlock()
			return hooks.running["/hooks/floor/a"] == 4
		})
		ids := handOffToShard0(t, fed, tokSubmitterB, hookSpec(srv.URL, "floor", "floor/b"), 10)
		settleAll(fed, "eu-west-1", tokSubmitterB, ids, 60*time.Second)
		aCalls, _ := hooks.of("/hooks/floor/a")
		settleAll(fed, "us-east-1", tokSubmitterA, flood, 90*time.Second)
		calls, most := hooks.of("/hooks/floor/b")
		share, longest := hooks.below("/hooks/floor/b", 2)
		t.Logf("team-b in pool floor: %d calls, at most %d at once (floor 2), below 2 for %.1f %% of the time its tasks waited once it had run 2 (longest %v); team-a's flood had started %d of 100 when they were done",
			calls, most, 100*share, longest.Round(time.Millisecond), aCalls)
		if most != 2 {
			t.Errorf("team-b ran at most %d at once with its tasks waiting behind a flood, want its floor of 2 (and no more: team-a weighs 1000)", most)
		}
		// Between one call's end and the next one's start a slot changes
		// hands (the completion recorded, then the claim): a few ms of each
		// 300. A freed slot of the floor given to team-a instead leaves
		// team-b short for a whole call of team-a's (300 ms).
		if share > 0.25 || longest >= 200*time.Millisecond {
			t.Errorf("team-b ran fewer than its floor of 2 for %.1f %% of the time its tasks waited once it had run 2, %v at the longest: its freed slots went to team-a; its calls: %s",
				100*share, longest.Round(time.Millisecond), hooks.spansOf("/hooks/floor/b"))
		}
		if aCalls >= len(flood) {
			t.Errorf("team-b's tasks were done after all of team-a's flood had started: they waited behind it")
		}
		if calls != len(ids) {
			t.Errorf("the hook saw %d calls of team-b's %d tasks", calls, len(ids))
		}
	})
}

// hookSpec is an http task of pool class calling the hook server's path.
func hookSpec(hookURL, class, path string) map[string]any {
	return map[string]any{"type": "http", "tags": map[string]string{"class": class},
		"payload": map[string]any{"url": hookURL + "/hooks/" + path, "body": map[string]int{"n": 1}}}
}

// handOffToShard0 submits n tasks of spec in eu-west-1, each handed off to
// us-east-1 under eu-west-1's id, so of shard 0.
func handOffToShard0(t *testing.T, fed *federation, token string, spec map[string]any, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		id, where := fed.submit("eu-west-1", token, spec)
		if where != "us-east-1" {
			t.Fatalf("task %s placed in %s, want us-east-1", id, where)
		}
		if p, err := task.ParseID(id); err != nil || p.Shard != 0 {
			t.Fatalf("task %s: shard %d (%v), want eu-west-1's only shard 0", id, p.Shard, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// settleAll waits until every task, read through region, is SUCCESS.
func settleAll(fed *federation, region, token string, ids []string, within time.Duration) {
	fed.t.Helper()
	deadline := time.Now().Add(within)
	for _, id := range ids {
		fed.waitState(region, token, id, task.Success, max(time.Until(deadline), time.Second))
	}
}

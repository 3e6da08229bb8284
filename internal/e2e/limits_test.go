package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// hookLog records the calls the http handler makes to a test server, by
// path: when each arrived and how many ran at once.
type hookLog struct {
	mu      sync.Mutex
	calls   map[string][]time.Time
	running map[string]int
	most    map[string]int
	pauses  map[string]int // retry-after answers still to give, by path
	hang    chan struct{}  // calls of a path ending in /hang wait for its close
}

func (h *hookLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	p := r.URL.Path
	h.mu.Lock()
	h.calls[p] = append(h.calls[p], time.Now())
	h.running[p]++
	h.most[p] = max(h.most[p], h.running[p])
	pause := h.pauses[p] > 0
	if pause {
		h.pauses[p]--
	}
	h.mu.Unlock()
	defer func() { h.mu.Lock(); h.running[p]--; h.mu.Unlock() }()
	if pause {
		w.Header().Set("Retry-After", "2")
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	if strings.HasSuffix(p, "/hang") {
		select {
		case <-h.hang:
		case <-r.Context().Done():
		}
	}
	if strings.HasSuffix(p, "/slow") {
		time.Sleep(300 * time.Millisecond)
	}
	if strings.HasSuffix(p, "/varied") {
		time.Sleep(time.Duration(200+rand.IntN(200)) * time.Millisecond)
	}
	_, _ = io.WriteString(w, "ok")
}

func (h *hookLog) of(path string) (calls []time.Time, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.calls[path]...), h.most[path]
}

// Limits through real processes (docs/limits.md): two regions with auth,
// three `ax worker`s in eu-west-1's pool, each running up to 20 tasks, and
// the built-in http handler calling a hook server that records every call.
//   - a limit_key limited to 50/s (burst 10) runs at 50 ± 5/s across the
//     three workers, and the unlimited tasks submitted behind it finish
//     while it is still being limited;
//   - a concurrency limit of 5 (tasks handed off from us-east-1) never has
//     a sixth running, and reaches 5;
//   - a 429 with Retry-After: 2 pauses its key for every worker: no call of
//     that key for 2 s, then every task of it succeeds;
//   - no limited task spends a retry (each SUCCESS at attempt 1), their
//     trails say RATE_LIMITED, CONCURRENCY_LIMITED and RETRY_AFTER, and
//     eu-west-1's /metrics counts ax_limited_total by kind;
//   - a limit added to the file takes hold on SIGHUP (a concurrency of 1);
//   - a limit_key over 64 bytes is a 400 naming limit_key.
func TestLimitsAcrossWorkers(t *testing.T) {
	testenv.Slow(t)
	hooks := &hookLog{calls: map[string][]time.Time{}, running: map[string]int{}, most: map[string]int{},
		pauses: map[string]int{"/hooks/paused": 1}, hang: make(chan struct{})}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	fed := newFederation(t, fedOpts{
		worker: fmt.Sprintf("http: {allow_prefixes: [%q], deny_private: false}\n", srv.URL+"/hooks/"),
		// starvation_threshold 1s: team-a's backlog in pool fair starves.
		extra: `starvation_threshold: 1s
limits:
  - {key: fifty, rate: 50, burst: 10}
  - {key: five, concurrency: 5}
  - {key: one, concurrency: 1}
  - {key: three, concurrency: 3}
`,
		// us-east-1 keeps its tasks over 3 shards: a concurrency of 1
		// holds for the region, not one per shard (maint.Maintainer.SetLimits).
		shards: map[string]int{"us-east-1": 3},
		// eu-west-1 also has the pool fair, shared 3:1 between the
		// tenants (its price keeps the untagged tasks above in cpu).
		pools: map[string]string{"eu-west-1": `- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}
- name: fair
  tags: {class: fair}
  slots: 8
  price_per_slot_hour: 1
  queue_capacity: 1000000
  fair_share: {tenants: {team-a: {weight: 3}, team-b: {weight: 1}}}
- name: lane
  tags: {class: lane}
  slots: 8
  price_per_slot_hour: 1
  slow_lane: {threshold: 500ms, max_share: 0.25}`},
		noWorkers: true,
	})
	fed.startWorker("us-east-1", "cpu")
	for range 3 {
		fed.startWorker("eu-west-1", "cpu")
	}
	fed.startWorker("eu-west-1", "fair", "--concurrency", "8")
	fed.startWorker("eu-west-1", "lane", "--concurrency", "8", "--type-concurrency", "http=4")
	fed.waitPlaceable()

	code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", map[string]any{
		"type": "noop", "limit_key": strings.Repeat("k", 65)})
	if code != http.StatusBadRequest || !strings.Contains(string(body), `"field":"limit_key"`) {
		t.Fatalf("a 65-byte limit_key: %d %s, want 400 naming limit_key", code, body)
	}

	// Three pools, each its own workers: the limits on pool cpu beside the
	// fair share of pool fair and then the slow lane and per-type slots of
	// pool lane (one run instead of the sum of both: 42 s before).
	t.Run("phases", func(t *testing.T) {
		t.Run("limits on pool cpu", func(t *testing.T) {
			t.Parallel()
			fed := fed.on(t)
			hookTask := func(path, key string) map[string]any {
				return map[string]any{"type": "http", "limit_key": key, "regions": []string{"eu-west-1"},
					"payload": map[string]any{"url": srv.URL + "/hooks/" + path, "body": map[string]int{"n": 1}}}
			}
			// Every task of the phase SUCCESS at its first attempt.
			settle := func(region string, ids []string, within time.Duration) {
				t.Helper()
				for _, id := range ids {
					tk := fed.waitState(region, tokSubmitterA, id, task.Success, within)
					if tk.Attempts != 1 {
						t.Errorf("%s: %d attempts, want 1 (a limited task spends no retry)", id, tk.Attempts)
					}
				}
			}
			reasonIn := func(region, id, reason string) bool {
				for _, s := range fed.trail(region, tokSubmitterA, id) {
					if s.Reason == reason {
						return true
					}
				}
				return false
			}

			// Rate: 250 tasks of key fifty straight into eu-west-1, then 20
			// unlimited ones behind them.
			var rated, free []string
			for i := 0; i < 250; i++ {
				id, _ := fed.submit("eu-west-1", tokSubmitterA, hookTask("rated", "fifty"))
				rated = append(rated, id)
			}
			for i := 0; i < 20; i++ {
				sp := hookTask("free", "")
				delete(sp, "limit_key")
				id, _ := fed.submit("eu-west-1", tokSubmitterA, sp)
				free = append(free, id)
			}
			settle("eu-west-1", free, 30*time.Second)
			freeDone := time.Now()
			settle("eu-west-1", rated, 60*time.Second)
			calls, _ := hooks.of("/hooks/rated")
			if len(calls) != 250 {
				t.Fatalf("the rated hook saw %d calls, want 250", len(calls))
			}
			sort.Slice(calls, func(i, j int) bool { return calls[i].Before(calls[j]) })
			// After the burst (10), the steady rate.
			rate := float64(len(calls)-11) / calls[len(calls)-1].Sub(calls[10]).Seconds()
			t.Logf("key fifty: %d calls over %s: %.1f/s after the burst", len(calls), calls[len(calls)-1].Sub(calls[0]), rate)
			if rate < 45 || rate > 55 {
				t.Errorf("key fifty ran at %.1f/s, want 50 ± 5", rate)
			}
			if !freeDone.Before(calls[len(calls)-1]) {
				t.Errorf("the unlimited tasks finished at %s, after the last limited one (%s): they waited behind the limit",
					freeDone.Format(time.StampMilli), calls[len(calls)-1].Format(time.StampMilli))
			}
			if !reasonIn("eu-west-1", rated[len(rated)-1], task.ReasonRateLimited) {
				t.Errorf("the last rated task's trail has no RATE_LIMITED step")
			}

			// Concurrency: 40 tasks of key five submitted in us-east-1 and handed
			// off to eu-west-1, each holding its slot 300 ms.
			var conc []string
			for i := 0; i < 40; i++ {
				id, where := fed.submit("us-east-1", tokSubmitterA, hookTask("five/slow", "five"))
				if where != "eu-west-1" {
					t.Fatalf("task %s placed in %s, want eu-west-1", id, where)
				}
				conc = append(conc, id)
			}
			settle("us-east-1", conc, 60*time.Second)
			calls, most := hooks.of("/hooks/five/slow")
			t.Logf("key five: %d calls, at most %d at once", len(calls), most)
			if most > 5 {
				t.Errorf("key five had %d running at once, limit 5", most)
			}
			if most < 5 {
				t.Errorf("key five reached only %d at once with 40 waiting, want 5", most)
			}
			if len(calls) != 40 {
				t.Errorf("the five hook saw %d calls, want 40", len(calls))
			}
			limitedSeen := false
			for _, id := range conc {
				if reasonIn("us-east-1", id, task.ReasonConcurrencyLimited) {
					limitedSeen = true
					break
				}
			}
			if !limitedSeen {
				t.Errorf("no task of key five has a CONCURRENCY_LIMITED step")
			}

			// Retry after: the first call of key paused answers 429 Retry-After: 2.
			first, _ := fed.submit("eu-west-1", tokSubmitterA, hookTask("paused", "paused"))
			// The pause holds from when the worker records it, a few ms after the
			// 429: the other tasks are submitted once it is (the task is READY).
			waitUntil(t, 20*time.Second, "the first task of key paused back READY after its 429", func() bool {
				c, _ := hooks.of("/hooks/paused")
				tk, _ := fed.getTask("eu-west-1", tokSubmitterA, first)
				return len(c) > 0 && tk.State == task.Ready
			})
			paused := []string{first}
			for i := 0; i < 6; i++ {
				id, _ := fed.submit("eu-west-1", tokSubmitterA, hookTask("paused", "paused"))
				paused = append(paused, id)
			}
			settle("eu-west-1", paused, 30*time.Second)
			calls, _ = hooks.of("/hooks/paused")
			sort.Slice(calls, func(i, j int) bool { return calls[i].Before(calls[j]) })
			if len(calls) != 8 {
				t.Fatalf("the paused hook saw %d calls, want 8 (one 429, then each task once)", len(calls))
			}
			// 2 s from the 429, less the handler's and Redis' clocks' skew (one
			// machine: a few ms).
			if gap := calls[1].Sub(calls[0]); gap < 1950*time.Millisecond {
				t.Errorf("a call of key paused %s after its Retry-After: 2, want none within 2 s", gap)
			}
			if !reasonIn("eu-west-1", first, task.ReasonRetryAfter) || !reasonIn("eu-west-1", paused[len(paused)-1], task.ReasonRetryAfter) {
				t.Errorf("no RETRY_AFTER step in the trails of key paused")
			}

			// SIGHUP: a limit added to eu-west-1's file holds from the leader's
			// next tick.
			r := fed.region("eu-west-1")
			f, err := os.OpenFile(r.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteString("  - {key: late, concurrency: 1}\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			fed.server("eu-west-1").signal(syscall.SIGHUP)
			waitUntil(t, 10*time.Second, "the reloaded limit in eu-west-1's store", func() bool {
				v, _ := r.rdb.HGet(context.Background(), "ax:{eu-west-1:0}:lim", "k:late").Result()
				return v != ""
			})
			var late []string
			for i := 0; i < 6; i++ {
				id, _ := fed.submit("eu-west-1", tokSubmitterA, hookTask("late/slow", "late"))
				late = append(late, id)
			}
			settle("eu-west-1", late, 30*time.Second)
			if _, most := hooks.of("/hooks/late/slow"); most != 1 {
				t.Errorf("key late had %d running at once after SIGHUP set its concurrency to 1", most)
			}

			// /metrics of eu-west-1's server (its leader) counts the parkings.
			waitUntil(t, 10*time.Second, "ax_limited_total of rate, concurrency and paused in eu-west-1's /metrics", func() bool {
				_, body := fed.call("eu-west-1", "", http.MethodGet, "/metrics", nil)
				for _, kind := range []string{"rate", "concurrency", "paused"} {
					re := regexp.MustCompile(`ax_limited_total\{kind="` + kind + `",pool="cpu",region="eu-west-1"\} (\S+)`)
					m := re.FindSubmatch(body)
					if m == nil {
						return false
					}
					if v, _ := strconv.ParseFloat(string(m[1]), 64); v <= 0 {
						return false
					}
				}
				return strings.Contains(string(body), `ax_pool_parked{pool="cpu",region="eu-west-1"}`)
			})
		})
		t.Run("fair share, slow lane, a blocked type", func(t *testing.T) {
			t.Parallel()
			fed := fed.on(t)
			fairShareAcrossTenants(t, fed, hooks, srv.URL)
			slowLaneHoldsItsShare(t, fed, srv.URL)
			blockedTypeStallsNoOther(t, fed, hooks, srv.URL)
		})
	})
	// After them (run beside them its 300 ms http tasks moved eu-west-1's
	// paused ones to pool lane): a concurrency of 1 over us-east-1's 3
	// shards holds for the region, its parts moving to the shards' work.
	t.Run("a concurrency of 1 over us-east-1's 3 shards", func(t *testing.T) {
		fed := fed.on(t)
		var ids []string
		shards := map[int]bool{}
		for len(ids) < 6 || len(shards) < 3 && len(ids) < 60 {
			id, where := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "http", "limit_key": "one",
				"regions": []string{"us-east-1"}, "payload": map[string]any{"url": srv.URL + "/hooks/one/slow", "body": map[string]int{"n": 1}}})
			if where != "us-east-1" {
				t.Fatalf("task %s placed in %s, want us-east-1", id, where)
			}
			p, err := task.ParseID(id)
			if err != nil {
				t.Fatal(err)
			}
			shards[p.Shard] = true
			ids = append(ids, id)
		}
		if len(shards) < 3 {
			t.Fatalf("%d tasks on %d shards, want 3", len(ids), len(shards))
		}
		// Its parts move every leader round (≤ 1 s), not at the 30 s refresh:
		// 6 tasks of 300 ms are done well within 20 s.
		deadline := time.Now().Add(20 * time.Second)
		for _, id := range ids {
			fed.waitState("us-east-1", tokSubmitterA, id, task.Success, max(time.Until(deadline), time.Second))
		}
		calls, most := hooks.of("/hooks/one/slow")
		t.Logf("key one: %d calls over %d shards, at most %d at once", len(calls), len(shards), most)
		if most != 1 || len(calls) != len(ids) {
			t.Errorf("key one (concurrency 1) had %d running at once, %d calls; want 1 and %d", most, len(calls), len(ids))
		}
	})
	// A task handed off keeps its id, and the id names its shard: every
	// task eu-west-1 (one shard) hands to us-east-1 (three) lands on
	// us-east-1's shard 0. A concurrency of 3 is usable in full there all
	// the same, its parts following the work (maint.Maintainer.SetLimits).
	t.Run("a concurrency of 3 handed off onto one of us-east-1's shards", func(t *testing.T) {
		fed := fed.on(t)
		var ids []string
		for range 15 {
			id, where := fed.submit("eu-west-1", tokSubmitterA, map[string]any{"type": "http", "limit_key": "three",
				"regions": []string{"us-east-1"}, "payload": map[string]any{"url": srv.URL + "/hooks/three/slow", "body": map[string]int{"n": 1}}})
			if where != "us-east-1" {
				t.Fatalf("task %s placed in %s, want us-east-1", id, where)
			}
			if p, err := task.ParseID(id); err != nil || p.Shard%3 != 0 {
				t.Fatalf("task %s: shard %d %v, want an id of shard 0 (us-east-1's shard 0)", id, p.Shard, err)
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			tk := fed.waitState("eu-west-1", tokSubmitterA, id, task.Success, 60*time.Second)
			if tk.Attempts != 1 {
				t.Errorf("%s: %d attempts, want 1", id, tk.Attempts)
			}
			reasons := map[string]bool{}
			for _, s := range fed.trail("eu-west-1", tokSubmitterA, id) {
				reasons[s.Reason] = true
			}
			if !reasons[task.ReasonHandedOff] || !reasons[task.ReasonReceived] {
				t.Errorf("%s: trail without its hand-off (HANDED_OFF, RECEIVED): %v", id, reasons)
			}
		}
		calls, most := hooks.of("/hooks/three/slow")
		t.Logf("key three: %d calls on us-east-1's shard 0, at most %d at once", len(calls), most)
		if most != 3 || len(calls) != len(ids) {
			t.Errorf("key three (concurrency 3, its work on one of 3 shards) had %d running at once, %d calls; want 3 and %d",
				most, len(calls), len(ids))
		}
	})
}

// blockedTypeStallsNoOther: pool lane's worker runs http in 4 slots of its
// own (--type-concurrency http=4): 8 http tasks whose calls hang (as many
// as the worker's slots) hold 4, and sleep tasks submitted behind them all
// succeed meanwhile (the other 4 slots); released, every hung task
// succeeds at its first attempt.
func blockedTypeStallsNoOther(t *testing.T, fed *federation, hooks *hookLog, hookURL string) {
	var once sync.Once
	release := func() { once.Do(func() { close(hooks.hang) }) }
	defer release()
	spec := func(ty string, payload any) map[string]any {
		return map[string]any{"type": ty, "tags": map[string]string{"class": "lane"}, "regions": []string{"eu-west-1"}, "payload": payload}
	}
	var hung []string
	for range 8 {
		id, _ := fed.submit("eu-west-1", tokSubmitterA, spec("http", map[string]any{"url": hookURL + "/hooks/lane/hang", "body": map[string]int{"n": 1}}))
		hung = append(hung, id)
	}
	waitUntil(t, 10*time.Second, "4 hung http calls", func() bool {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		return hooks.running["/hooks/lane/hang"] == 4
	})
	for range 4 {
		id, _ := fed.submit("eu-west-1", tokSubmitterA, spec("sleep", map[string]int{"ms": 50}))
		fed.waitState("eu-west-1", tokSubmitterA, id, task.Success, 10*time.Second)
	}
	// The 4 hung tasks waiting READY (past the 1 s starvation_threshold) in
	// a pool without a fair share: starving in `ax regions` and by tenant in
	// /metrics.
	waitUntil(t, 10*time.Second, "pool lane's 4 waiting http tasks starving in ax regions and ax_tenant_tasks_starving", func() bool {
		row := regionsRow(t, fed, "eu-west-1", "eu-west-1", "lane")
		if row == nil || row["STARVING"] != "4" {
			return false
		}
		_, body := fed.call("eu-west-1", "", http.MethodGet, "/metrics", nil)
		return strings.Contains(string(body), `ax_tenant_tasks_starving{pool="lane",region="eu-west-1",tenant="team-a"} 4`)
	})
	if _, most := hooks.of("/hooks/lane/hang"); most != 4 {
		t.Errorf("%d hung http calls at once, want http's own 4 slots", most)
	}
	release()
	for _, id := range hung {
		if tk := fed.waitState("eu-west-1", tokSubmitterA, id, task.Success, 20*time.Second); tk.Attempts != 1 {
			t.Errorf("hung http task %s: %d attempts, want 1", id, tk.Attempts)
		}
	}
}

// slowLaneHoldsItsShare: eu-west-1's pool lane (8 slots, one worker) keeps
// slow types to 2 slots (max_share 0.25, threshold 500 ms).
//   - a first sleep task of 1.5 s makes sleep slow (its heartbeat past the
//     threshold, then the learnt run time the leader writes);
//   - 10 sleep tasks of 800 ms of team-a's (one handed off from us-east-1) and then 40
//     quick http ones: never more than 2 sleep tasks RUNNING at once (their
//     start and end in the store), 2 reached; every quick one finished
//     before the last sleep task started; the sleep tasks each ran once
//     (attempt 1) and the last has a SLOW_LANE_FULL step;
//   - /metrics has ax_slow_lane_slots 2 and ax_slow_lane_running for lane.
func slowLaneHoldsItsShare(t *testing.T, fed *federation, hookURL string) {
	r := fed.region("eu-west-1")
	ctx := context.Background()
	start := time.Now()
	defer func() { t.Logf("slow lane phase: %s", time.Since(start).Round(time.Millisecond)) }()
	sleep := func(ms int) map[string]any {
		return map[string]any{"type": "sleep", "tags": map[string]string{"class": "lane"}, "regions": []string{"eu-west-1"},
			"payload": map[string]int{"ms": ms}}
	}
	first, _ := fed.submit("eu-west-1", tokSubmitterA, sleep(1500))
	fed.waitState("eu-west-1", tokSubmitterA, first, task.Success, 20*time.Second)
	waitUntil(t, 10*time.Second, "sleep slow in pool lane", func() bool {
		ts, err := r.store.Tasks().SlowTypes(ctx, "lane")
		return err == nil && slices.Contains(ts, queue.LaneType{Type: "sleep", Tenant: "team-a"})
	})

	// team-a's: sleep is slow for team-a only (TestSlowLanePerTenant)
	handed := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, sleep(800))
	slow := []string{handed.ID}
	for range 9 {
		id, _ := fed.submit("eu-west-1", tokSubmitterA, sleep(800))
		slow = append(slow, id)
	}
	var quick []string
	for range 40 {
		id, _ := fed.submit("eu-west-1", tokSubmitterA, map[string]any{"type": "http", "tags": map[string]string{"class": "lane"},
			"regions": []string{"eu-west-1"}, "payload": map[string]any{"url": hookURL + "/hooks/lane-quick", "body": map[string]int{"n": 1}}})
		quick = append(quick, id)
	}
	// `ax regions` (the real CLI) shows the parked sleep tasks.
	waitUntil(t, 10*time.Second, "pool lane's parked sleep tasks in ax regions", func() bool {
		row := regionsRow(t, fed, "eu-west-1", "eu-west-1", "lane")
		return row != nil && row["PARKED"] != "0"
	})
	var quickDone time.Time
	for _, id := range quick {
		tk := fed.waitState("eu-west-1", tokSubmitterA, id, task.Success, 30*time.Second)
		if tk.FinishedAt != nil && tk.FinishedAt.After(quickDone) {
			quickDone = *tk.FinishedAt
		}
	}
	fed.waitState("us-east-1", tokSubmitterA, handed.ID, task.Success, 30*time.Second)
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	var lastStart time.Time
	for _, id := range slow[1:] {
		fed.waitState("eu-west-1", tokSubmitterA, id, task.Success, 30*time.Second)
	}
	for _, id := range slow {
		tk, err := r.store.Get(ctx, id)
		if err != nil || tk.StartedAt == nil || tk.FinishedAt == nil {
			t.Fatalf("%s: %v %+v", id, err, tk)
		}
		if tk.Attempts != 1 {
			t.Errorf("sleep task %s: %d attempts, want 1 (waiting for the lane spends no retry)", id, tk.Attempts)
		}
		edges = append(edges, edge{*tk.StartedAt, 1}, edge{*tk.FinishedAt, -1})
		if tk.StartedAt.After(lastStart) {
			lastStart = *tk.StartedAt
		}
	}
	// Ends before starts at the same instant: the end freed the slot.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].d < edges[j].d
		}
		return edges[i].at.Before(edges[j].at)
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	t.Logf("slow lane: at most %d sleep tasks at once; the 40 quick ones done %s before the last sleep task started",
		most, lastStart.Sub(quickDone).Round(time.Millisecond))
	if most != 2 {
		t.Errorf("pool lane ran up to %d slow tasks at once, want its lane's 2 (and 2 reached)", most)
	}
	if !quickDone.Before(lastStart) {
		t.Errorf("the quick tasks finished at %s, after the last slow task started (%s): they waited behind the slow ones",
			quickDone.Format(time.StampMilli), lastStart.Format(time.StampMilli))
	}
	found := false
	for _, s := range fed.trail("eu-west-1", tokSubmitterA, slow[len(slow)-1]) {
		found = found || s.Reason == task.ReasonSlowLaneFull
	}
	if !found {
		t.Errorf("the last sleep task's trail has no SLOW_LANE_FULL step")
	}
	waitUntil(t, 10*time.Second, "ax_slow_lane_slots and ax_slow_lane_running of lane in eu-west-1's /metrics", func() bool {
		_, body := fed.call("eu-west-1", "", http.MethodGet, "/metrics", nil)
		return strings.Contains(string(body), `ax_slow_lane_slots{pool="lane",region="eu-west-1"} 2`) &&
			strings.Contains(string(body), `ax_slow_lane_running{pool="lane",region="eu-west-1"}`)
	})
}

// fairShareAcrossTenants: eu-west-1's pool fair (8 slots, one worker)
// shares its slots 3:1 between team-a and team-b (docs/fairness.md).
//   - both with a backlog, team-a holds 3 slots for each of team-b's
//     (±10 %, the hook's running calls sampled) while both have work
//     waiting, team-b's tasks handed off from us-east-1 among them;
//   - given a floor of 4 on SIGHUP, team-b submitting while team-a holds
//     every slot with a backlog of 100 000 waiting gets 4 slots from the
//     next claims, and never a fifth (past its floor, 4 ÷ weight 1 is more
//     than team-a's).
func fairShareAcrossTenants(t *testing.T, fed *federation, hooks *hookLog, hookURL string) {
	spec := func(path string) map[string]any {
		return map[string]any{"type": "http", "tags": map[string]string{"class": "fair"},
			"payload": map[string]any{"url": hookURL + "/hooks/" + path, "body": map[string]int{"n": 1}}}
	}
	batch := func(region, token, path string, n int) []string {
		t.Helper()
		var ts []map[string]any
		for range n {
			ts = append(ts, spec(path))
		}
		code, body := fed.call(region, token, http.MethodPost, "/v1/tasks/batch", map[string]any{"tasks": ts})
		var res apiv1.BatchResponse
		if code != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Accepted != n {
			t.Fatalf("batch of %d to %s: %d %s", n, region, code, body)
		}
		var ids []string
		for _, r := range res.Results {
			ids = append(ids, r.Task.ID)
		}
		return ids
	}
	calls := func(path string, n int, within time.Duration) []time.Time {
		t.Helper()
		var c []time.Time
		waitUntil(t, within, fmt.Sprintf("%d calls of %s", n, path), func() bool {
			c, _ = hooks.of("/hooks/" + path)
			return len(c) >= n
		})
		sort.Slice(c, func(i, j int) bool { return c[i].Before(c[j]) })
		return c
	}

	// Weights 3:1: 150 of team-a's tasks and 50 of team-b's, 5 of them
	// handed off from us-east-1 (which has no pool fair).
	// Slots held: the hook's running calls of each tenant, every 20 ms.
	type sample struct {
		at   time.Time
		a, b int
	}
	var samples []sample
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				hooks.mu.Lock()
				samples = append(samples, sample{now, hooks.running["/hooks/fair-a/varied"], hooks.running["/hooks/fair-b/varied"]})
				hooks.mu.Unlock()
			}
		}
	}()
	handed := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterB, spec("fair-b/varied"))
	batch("us-east-1", tokSubmitterB, "fair-b/varied", 4)
	batch("eu-west-1", tokSubmitterB, "fair-b/varied", 45)
	batch("eu-west-1", tokSubmitterA, "fair-a/varied", 150)
	t0 := time.Now()
	a, b := calls("fair-a/varied", 150, 60*time.Second), calls("fair-b/varied", 50, 60*time.Second)
	close(stop)
	<-sampled
	fed.waitState("us-east-1", tokSubmitterB, handed.ID, task.Success, 20*time.Second)
	// While both have work waiting: from the last submit, past the first
	// two turns of the 8 slots (team-b's tasks took every slot before
	// team-a's came), to the first tenant's last start.
	var after []time.Time
	for _, x := range append(append([]time.Time(nil), a...), b...) {
		if x.After(t0) {
			after = append(after, x)
		}
	}
	sort.Slice(after, func(i, j int) bool { return after[i].Before(after[j]) })
	if len(after) < 100 {
		t.Fatalf("only %d starts after the last submit", len(after))
	}
	t0 = after[15]
	t1 := a[len(a)-1]
	if b[len(b)-1].Before(t1) {
		t1 = b[len(b)-1]
	}
	in := func(c []time.Time, from, to time.Time) int {
		n := 0
		for _, x := range c {
			if !x.Before(from) && !x.After(to) {
				n++
			}
		}
		return n
	}
	var sa, sb, ns int
	for _, x := range samples {
		if !x.at.Before(t0) && !x.at.After(t1) {
			sa, sb, ns = sa+x.a, sb+x.b, ns+1
		}
	}
	t.Logf("fair: team-a %d and team-b %d starts, %.2f and %.2f slots held on average (%d samples over %s) while both had work waiting",
		in(a, t0, t1), in(b, t0, t1), float64(sa)/float64(ns), float64(sb)/float64(ns), ns, t1.Sub(t0).Round(time.Millisecond))
	if ns < 50 || sb == 0 || float64(sa)/float64(sb) < 2.7 || float64(sa)/float64(sb) > 3.3 {
		t.Errorf("pool fair: team-a:team-b held %d:%d slot-samples (%d samples) while both waited, want 3:1 ± 10 %%", sa, sb, ns)
	}

	// A floor of 4 for team-b, by SIGHUP.
	r := fed.region("eu-west-1")
	cfg, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "team-b: {weight: 1}", "team-b: {weight: 1, floor: 4}", 1))
	if err := os.WriteFile(r.cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	fed.server("eu-west-1").signal(syscall.SIGHUP)
	waitUntil(t, 10*time.Second, "team-b's floor in eu-west-1's store", func() bool {
		v, _ := r.rdb.HGet(context.Background(), "ax:{eu-west-1:0}:fs:fair", "team-b").Result()
		return v == "1000 4 0"
	})
	aIDs := batch("eu-west-1", tokSubmitterA, "fair2-a/varied", 100)
	waitUntil(t, 20*time.Second, "team-a running in all 8 slots", func() bool {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		return hooks.running["/hooks/fair2-a/varied"] == 8
	})
	// Behind team-a's 92 left of those, 100 000 more of team-a (stored
	// straight into eu-west-1's Redis, READY in pool fair: what 100 batch
	// requests would store; each holds its slot 300 ms, so the pool drains
	// them slowly until the federation stops): team-b's floor must not
	// wait behind them.
	stuffed := time.Now()
	bulk := make([]queue.NewTask, 0, queue.MaxBatch)
	for i := 0; i < 100_000; i++ {
		sp, err := task.DecodeSpec([]byte(`{"type":"http","tenant":"team-a","tags":{"class":"fair"},"regions":["eu-west-1"],"payload":{"url":"` + hookURL + `/hooks/fair2-a/bulk/slow","body":{"n":1}}}`))
		if err == nil {
			err = sp.Normalize(task.DefaultDefaults(), time.Now())
		}
		if err != nil {
			t.Fatal(err)
		}
		if bulk = append(bulk, queue.NewTask{Spec: sp, Pool: "fair"}); len(bulk) == queue.MaxBatch {
			res, err := r.store.Submitter().Submit(context.Background(), bulk...)
			if err != nil || len(res) != len(bulk) || res[0].Err != nil {
				t.Fatalf("storing team-a's backlog: %v %+v", err, res[:1])
			}
			bulk = bulk[:0]
		}
	}
	t.Logf("fair: 100 000 tasks of team-a stored in %s", time.Since(stuffed).Round(time.Millisecond))
	bIDs := batch("eu-west-1", tokSubmitterB, "fair2-b/varied", 10)
	waitUntil(t, 10*time.Second, "team-a's backlog starving in eu-west-1's /metrics", func() bool {
		_, body := fed.call("eu-west-1", "", http.MethodGet, "/metrics", nil)
		m := regexp.MustCompile(`ax_tenant_tasks_starving\{pool="fair",region="eu-west-1",tenant="team-a"\} (\S+)`).FindSubmatch(body)
		v := 0.0
		if m != nil {
			v, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		return v > 0
	})
	calls("fair2-b/varied", 10, 30*time.Second)
	calls("fair2-a/varied", 100, 60*time.Second)
	_, most := hooks.of("/hooks/fair2-b/varied")
	// By the store's clock: when team-b's tasks were READY (the last
	// submitted) and when its 4th was claimed; a claim takes b's first, so
	// no task of team-a is claimed in between (one claimed in the same
	// claim as b's 4th has the same start).
	started := func(id string) task.Task {
		tk, err := r.store.Get(context.Background(), id)
		if err != nil || tk.StartedAt == nil {
			t.Fatalf("%s: %v %+v", id, err, tk)
		}
		return *tk
	}
	var ready time.Time
	var bStarts []time.Time
	for _, id := range bIDs {
		tk := started(id)
		if tk.CreatedAt.After(ready) {
			ready = tk.CreatedAt
		}
		bStarts = append(bStarts, *tk.StartedAt)
	}
	sort.Slice(bStarts, func(i, j int) bool { return bStarts[i].Before(bStarts[j]) })
	early := 0
	for _, id := range aIDs {
		if s := *started(id).StartedAt; s.After(ready) && s.Before(bStarts[3]) {
			early++
		}
	}
	t.Logf("fair: team-b's floor of 4 claimed %s after its submit, %d claims of team-a in between; at most %d of team-b at once",
		bStarts[3].Sub(ready), early, most)
	if most != 4 {
		t.Errorf("team-b ran at most %d at once with a floor of 4 and team-a's backlog, want exactly 4", most)
	}
	if early > 0 {
		t.Errorf("%d tasks of team-a were claimed after team-b's were READY and before its 4th: want team-b's floor first", early)
	}

	// A live override in the global etcd replaces the file's fair share of
	// the pool (a max of 2 for team-a) from the leader's next round; an
	// invalid one changes nothing; deleting it restores the file's.
	ctx := context.Background()
	etcd, key := fed.global.Client(), "/ax/fairshare/eu-west-1/fair"
	share := func() string {
		v, _ := r.rdb.HGet(ctx, "ax:{eu-west-1:0}:fs:fair", "team-a").Result()
		return v
	}
	if _, err := etcd.Put(ctx, key, `{"tenants": {"team-a": {"weight": 3, "max": 2}, "team-b": {"weight": 1}}}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "team-a's max of 2 from the etcd override in eu-west-1's store", func() bool { return share() == "3000 0 2" })
	if _, err := etcd.Put(ctx, key, `{"tenants": {"team-a": {"floor": 99}}}`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // several leader rounds
	if v := share(); v != "3000 0 2" {
		t.Errorf("after an invalid override team-a's share is %q; want the last valid one kept", v)
	}
	if _, err := etcd.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the file's fair share back in eu-west-1's store", func() bool { return share() == "3000 0 0" })
}

// regionsRow is `ax regions`' row of region's pool, asked of from's
// server, by column (REGION PROVIDER LEADER ... STARVING: the columns
// before FILL, whose values are one word each; nil: no such row).
func regionsRow(t *testing.T, fed *federation, from, region, pool string) map[string]string {
	t.Helper()
	out, stderr, code := runAx(t, fed.server(from).api, "--token", fed.token(tokOperator), "regions")
	if code != 0 {
		t.Fatalf("ax regions: exit %d: %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	head := strings.Fields(lines[0])
	n := slices.Index(head, "FILL")
	if n < 0 {
		t.Fatalf("ax regions: no FILL column in %q", lines[0])
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < n {
			continue
		}
		row := make(map[string]string, n)
		for i, h := range head[:n] {
			row[h] = f[i]
		}
		if row["REGION"] == region && row["POOL"] == pool {
			return row
		}
	}
	return nil
}

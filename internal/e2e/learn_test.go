package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Issue 14, learnt durations: two regions, each with one CPU pool. The
// pool of us-east-1 costs half as much per slot-hour but runs the work 4x
// slower (its workers' exec rule sleeps 0.8 s, eu-west-1's 0.2 s: the same
// task type, different handler configs). Before anything ran every server
// places on the cheap pool (both durations are the 1 s default). Under a
// steady stream the cheap pool's queue fills and spills, the fast pool
// completes tasks too, both leaders publish what their completions taught
// them, and every server of both regions then sees the slow pool's real
// cost: new tasks land in eu-west-1 though its price is twice as high, and
// `ax explain -o json` shows both estimates as learnt.
func TestSlowCheapPoolStopsWinningOnceLearnt(t *testing.T) {
	slow, fast := "us-east-1", "eu-west-1"
	fed := newFederation(t, fedOpts{servers: 2,
		// team-b's budget is spent by one task (below).
		extra: "budget_refresh: 300ms\ntenants: {team-b: {monthly_budget_usd: 0.000001, over_budget: refuse}}",
		pools: map[string]string{
			slow: "- {name: cpu, tags: {class: cpu}, slots: 20, price_per_slot_hour: 0.02, queue_capacity: 40}",
			fast: "- {name: cpu, tags: {class: cpu}, slots: 20, price_per_slot_hour: 0.04, queue_capacity: 40}",
		},
		regionWorker: map[string]string{
			slow: `exec: {allow: {work: {argv: [/bin/sleep, "0.8"]}}}`,
			fast: `exec: {allow: {work: {argv: [/bin/sleep, "0.2"]}}}`,
		}})
	spec := map[string]any{"type": "exec", "tags": map[string]string{"class": "cpu"},
		"payload": map[string]any{"command": "work"}}
	var servers []*proc
	for _, r := range fed.order {
		servers = append(servers, fed.region(r).servers...)
	}
	explain := func(s *proc) apiv1.Explanation {
		t.Helper()
		code, body := fed.callAPI(s.api, tokSubmitterA, http.MethodPost, "/v1/placement/explain", spec)
		var ex apiv1.Explanation
		if code != http.StatusOK || json.Unmarshal(body, &ex) != nil {
			t.Fatalf("explain on %s: %d %s", s.name, code, body)
		}
		return ex
	}
	cand := func(ex apiv1.Explanation, region string) apiv1.Candidate {
		for _, c := range ex.Candidates {
			if c.Region == region {
				return c
			}
		}
		t.Fatalf("no candidate in %s: %+v", region, ex.Candidates)
		return apiv1.Candidate{}
	}
	for _, s := range servers {
		ex := explain(s)
		if ex.Chosen == nil || ex.Chosen.Region != slow || cand(ex, fast).EstimateSource != "default" ||
			cand(ex, slow).EstimateSource != "default" {
			t.Fatalf("before any run %s chooses %+v (candidates %+v)", s.name, ex.Chosen, ex.Candidates)
		}
	}
	// learnt: the server judges by learnt durations alone (price × duration,
	// before the queue penalty) that the slow pool costs more.
	learnt := func(s *proc) bool {
		ex := explain(s)
		a, b := cand(ex, slow), cand(ex, fast)
		return a.EstimateSource == "learnt" && b.EstimateSource == "learnt" && b.BaseCost < a.BaseCost
	}
	succeeded := func() int {
		n := 0
		for _, r := range fed.order {
			c, err := fed.region(r).store.Counts(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			n += c.Succeeded
		}
		return n
	}

	// A steady stream of ~40 tasks/s over every server, more than the slow
	// pool drains (20 slots / 0.8 s = 25/s), until every server has learnt.
	landed := map[string]int{}
	refused, flipAt, submitted := 0, -1, 0
	start := time.Now()
	for flipAt < 0 {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("not learnt after %v: %d submitted (%v, %d refused), %d succeeded", time.Since(start), submitted,
				landed, refused, succeeded())
		}
		for range 4 {
			s := servers[submitted%len(servers)]
			submitted++
			code, body := fed.callAPI(s.api, tokSubmitterA, http.MethodPost, "/v1/tasks", spec)
			var r struct {
				Region string `json:"region"`
			}
			switch {
			case code == http.StatusCreated && json.Unmarshal(body, &r) == nil:
				landed[r.Region]++
			case code == http.StatusTooManyRequests:
				refused++
			default:
				t.Fatalf("submit to %s: %d %s", s.name, code, body)
			}
		}
		time.Sleep(100 * time.Millisecond)
		if submitted%12 == 0 {
			done := succeeded()
			all := true
			for _, s := range servers {
				all = all && learnt(s)
			}
			if all {
				flipAt = done
			}
		}
	}
	t.Logf("every server judged the slow pool dearer after %d completions (%v after the first submit); "+
		"submitted %d: %v, %d refused (429)", flipAt, time.Since(start).Round(100*time.Millisecond), submitted, landed, refused)

	// Once the queues are empty, new tasks land in the fast pool whichever
	// server takes them: the price is twice as high, the task 4x shorter.
	waitUntil(t, 2*time.Minute, "both regions idle", func() bool {
		for _, r := range fed.order {
			c, err := fed.region(r).store.Counts(context.Background())
			if err != nil || c.Ready+c.Running+c.Pending > 0 {
				return false
			}
		}
		return true
	})
	for i := range 20 {
		s := servers[i%len(servers)]
		code, body := fed.callAPI(s.api, tokSubmitterA, http.MethodPost, "/v1/tasks", spec)
		var r struct {
			Region string `json:"region"`
		}
		if code != http.StatusCreated || json.Unmarshal(body, &r) != nil || r.Region != fast {
			t.Fatalf("task %d submitted to %s: %d %s, want it in %s", i, s.name, code, body, fast)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// What an operator sees: `ax explain -o json` on every server.
	for _, s := range servers {
		out, stderr, code := runAx(t, s.api, "--token", fed.token(tokSubmitterA), "explain", "--type", "exec",
			"--tag", "class=cpu", "-o", "json")
		var ex apiv1.Explanation
		if code != 0 || json.Unmarshal([]byte(out), &ex) != nil {
			t.Fatalf("ax explain on %s: exit %d: %s %s", s.name, code, out, stderr)
		}
		a, b := cand(ex, slow), cand(ex, fast)
		if ex.Chosen == nil || ex.Chosen.Region != fast || a.EstimateSource != "learnt" || b.EstimateSource != "learnt" ||
			a.Observations == 0 || b.Observations == 0 || a.ExpectedSeconds < 0.8 || b.ExpectedSeconds < 0.2 ||
			b.ExpectedSeconds >= a.ExpectedSeconds/2 {
			t.Fatalf("ax explain on %s: chosen %+v\nslow %+v\nfast %+v", s.name, ex.Chosen, a, b)
		}
		t.Logf("%s: slow %.3f s (%d runs, spread %.3f s), fast %.3f s (%d runs, spread %.3f s)", s.name,
			a.ExpectedSeconds, a.Observations, a.SpreadSeconds, b.ExpectedSeconds, b.Observations, b.SpreadSeconds)
	}

	// The table through the real binary keeps the digits of a per-task cost
	// of a few millionths of a dollar (it printed $0.0000 for every pool),
	// and an unplaceable task exits non-zero after printing why (it exited 0).
	out, stderr, code := runAx(t, servers[0].api, "--token", fed.token(tokSubmitterA), "explain", "--type", "exec", "--tag", "class=cpu")
	if code != 0 || !regexp.MustCompile(`\$0\.00000[1-9]\d{2,}/task`).MatchString(out) || !strings.Contains(out, "CHOSEN") {
		t.Fatalf("ax explain (table): exit %d, want 0 and per-task costs to 6 significant digits:\n%s%s", code, out, stderr)
	}
	out, stderr, code = runAx(t, servers[0].api, "--token", fed.token(tokSubmitterA), "explain", "--type", "exec", "--tag", "class=none")
	if code == 0 || !strings.Contains(out, "TAG_MISMATCH") || !strings.Contains(out, "outcome: UNPLACEABLE") || !strings.Contains(stderr, "unplaceable") {
		t.Fatalf("ax explain (unplaceable): exit %d, want non-zero after the reasons:\n%s%s", code, out, stderr)
	}

	// A monthly budget through real servers: team-b's ($0.000001, refuse)
	// is spent by one task of its own handed off to the fast region (0.2 s
	// at $0.04/slot-h ≈ $0.0000022). From the next spend reads every server
	// of both regions refuses team-b's submits (429 budget_exceeded naming
	// monthly_budget_usd, nothing stored); team-a's still land; `ax cost`
	// shows the budget.
	h := fed.handedOffTask(slow, fast, tokSubmitterB, spec)
	fed.waitState(slow, tokSubmitterB, h.ID, task.Success, 20*time.Second)
	for _, s := range servers {
		waitUntil(t, 10*time.Second, "team-b's submits refused past its budget on "+s.name, func() bool {
			code, body := fed.callAPI(s.api, tokSubmitterB, http.MethodPost, "/v1/tasks", spec)
			if code == http.StatusCreated {
				return false // the spend not read yet
			}
			if code != http.StatusTooManyRequests || !strings.Contains(string(body), `"code":"budget_exceeded"`) ||
				!strings.Contains(string(body), `"field":"monthly_budget_usd"`) {
				t.Fatalf("team-b's submit to %s past its budget: %d %s", s.name, code, body)
			}
			return true
		})
		if code, body := fed.callAPI(s.api, tokSubmitterA, http.MethodPost, "/v1/tasks", spec); code != http.StatusCreated {
			t.Fatalf("team-a's submit to %s beside team-b's spent budget: %d %s", s.name, code, body)
		}
	}
	out, stderr, code = runAx(t, servers[0].api, "--token", fed.token(tokOperator), "cost")
	if code != 0 || !regexp.MustCompile(`budget team-b: \$\S+ of \$0\.000001 this month \(\d+ %, over;`).MatchString(out) {
		t.Fatalf("ax cost: exit %d, want team-b's budget line:\n%s%s", code, out, stderr)
	}
}

// Issue 14: during a live price override the tasks recorded the worker's
// configured price. Through real processes: an override put in the global
// etcd is what the next tasks record at claim, and removing it brings the
// configured price back.
//
// The same federation (one run, two checks) also carries a small cheap
// pool for the expected-wait check below: it has its own tag, so the price
// check's tasks never go there.
func TestLivePriceOverrideIsRecorded(t *testing.T) {
	fed := newFederation(t, fedOpts{
		pools: map[string]string{
			"us-east-1": "- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}\n" +
				"- {name: small, tags: {batch: \"yes\"}, slots: 2, price_per_slot_hour: 0.01, queue_capacity: 1000}\n" +
				"- {name: spot, tags: {spike: \"yes\"}, slots: 1, price_per_slot_hour: 0.01, max_wait: 10m}",
			"eu-west-1": "- {name: cpu, tags: {class: cpu, batch: \"yes\", spike: \"yes\"}, slots: 50, price_per_slot_hour: 0.04}",
		},
		worker: `exec: {allow: {work: {argv: [/bin/sleep, "2"]}}}`,
		// default_duration: the work's 2 s, so a pool's expected wait is
		// right before any run of it is learnt (one server's burst is no
		// longer damped ×servers, which had hidden a 1 s default).
		extra:     "placement: {max_wait: 4s, default_duration: 2s, replace_on_price_rise: 1.5}",
		noWorkers: true,
	})
	for _, r := range fed.order {
		fed.startWorker(r, "cpu")
	}
	fed.startWorker("us-east-1", "small", "--concurrency", "2")
	fed.startWorker("us-east-1", "spot", "--concurrency", "1")
	fed.waitPlaceable()
	t.Run("a small cheap pool with a long queue spills before waits pass max_wait", func(t *testing.T) {
		expectedWaitSpills(t, fed)
	})
	t.Run("a price spike re-places the READY tasks to the now-cheapest pool", func(t *testing.T) {
		spikeReplaces(t, fed)
	})
	spec := map[string]any{"type": "noop", "regions": []string{"us-east-1"}, "tags": map[string]string{"class": "cpu"}}
	recorded := func() float64 {
		t.Helper()
		id, _ := fed.submit("us-east-1", tokSubmitterA, spec)
		return fed.waitState("us-east-1", tokSubmitterA, id, task.Success, 20*time.Second).PricePerHour
	}
	if p := recorded(); p != 0.04 {
		t.Fatalf("before the override the task recorded %v, want the configured 0.04", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := "/ax/prices/us-east-1/cpu"
	if _, err := fed.global.Client().Put(ctx, key, `{"price_per_slot_hour": 0.2}`); err != nil {
		t.Fatal(err)
	}
	took := waitUntil(t, 15*time.Second, "tasks record the 5x override", func() bool { return recorded() == 0.2 })
	t.Logf("override recorded by claims %v after it was set", took.Round(100*time.Millisecond))
	if _, err := fed.global.Client().Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, "tasks record the configured price again", func() bool { return recorded() == 0.04 })
}

// spikeReplaces: us-east-1's one-slot pool "spot" costs a quarter of
// eu-west-1's and its max_wait is 10 minutes, so a burst of 12 two-second
// tasks all queue there. Then its live price jumps to 10× (past
// replace_on_price_rise 1.5×): the region leader gives the tasks still
// READY back to placement (REPLACED_COST), which hands them to eu-west-1.
// Every task runs once (one attempt); a re-placed one ran in eu-west-1.
func spikeReplaces(t *testing.T, fed *federation) {
	const n = 12
	spec := map[string]any{"type": "exec", "tags": map[string]string{"spike": "yes"}, "payload": map[string]any{"command": "work"}}
	var ids []string
	for i := range n {
		code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", spec)
		var r struct {
			ID   string `json:"id"`
			Pool string `json:"pool"`
		}
		if code != http.StatusCreated || json.Unmarshal(body, &r) != nil || r.Pool != "spot" {
			t.Fatalf("submit %d: %d %s; want it placed in the cheap spot pool", i, code, body)
		}
		ids = append(ids, r.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := "/ax/prices/us-east-1/spot"
	if _, err := fed.global.Client().Put(ctx, key, `{"price_per_slot_hour": 0.1}`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = fed.global.Client().Delete(ctx, key)
	})
	replaced := 0
	for _, id := range ids {
		tk := fed.waitState("us-east-1", tokSubmitterA, id, task.Success, 90*time.Second)
		moved := false
		for _, st := range fed.trail("us-east-1", tokSubmitterA, id) {
			moved = moved || st.Reason == task.ReasonReplacedCost
		}
		switch {
		case tk.Attempts != 1:
			t.Errorf("task %s ran %d attempts, want 1", id, tk.Attempts)
		case moved && tk.Pool != "cpu":
			t.Errorf("task %s re-placed but ran in %s", id, tk.Pool)
		case moved:
			replaced++
		case tk.Pool != "spot":
			t.Errorf("task %s ran in %s without a REPLACED_COST step", id, tk.Pool)
		}
	}
	t.Logf("%d of %d tasks re-placed to eu-west-1 after the spike", replaced, n)
	// One task a slot runs at a time for 2 s: at most a handful ran in the
	// spot pool before the leader's next round (2 s) moved the rest.
	if replaced < n/2 {
		t.Fatalf("%d of %d tasks re-placed, want at least %d", replaced, n, n/2)
	}
}

// expectedWaitSpills: us-east-1's pool "small" costs a quarter of
// eu-west-1's but has 2 slots for 2-second tasks; its queue capacity is
// 1000, so by fill alone (the watermarks) a burst of 30 would all queue
// there, the last waiting ~28 s. With placement.max_wait 4s the server
// judges each pool by its expected wait (tasks ahead ÷ drain rate): the
// cheap pool takes what it can start within 4 s and the rest spills to the
// idle eu-west-1 pool, and the tasks that ran in the cheap pool waited no
// longer than the target (plus a second for publication and claim lag).
func expectedWaitSpills(t *testing.T, fed *federation) {
	const maxWait = 4 * time.Second
	spec := map[string]any{"type": "exec", "tags": map[string]string{"batch": "yes"}, "payload": map[string]any{"command": "work"}}
	explain := func() apiv1.Explanation {
		t.Helper()
		code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/placement/explain", spec)
		var ex apiv1.Explanation
		if code != http.StatusOK || json.Unmarshal(body, &ex) != nil {
			t.Fatalf("explain: %d %s", code, body)
		}
		return ex
	}
	waitUntil(t, 30*time.Second, "the small pool placeable", func() bool {
		ex := explain()
		return ex.Chosen != nil && ex.Chosen.Pool == "small"
	})
	var inSmall []string
	landed := map[string]int{}
	var mid apiv1.Explanation
	for i := range 30 {
		code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", spec)
		var r struct {
			ID     string `json:"id"`
			Region string `json:"region"`
			Pool   string `json:"pool"`
		}
		if code != http.StatusCreated || json.Unmarshal(body, &r) != nil {
			t.Fatalf("submit %d: %d %s", i, code, body)
		}
		landed[r.Region+"/"+r.Pool]++
		if r.Pool == "small" && r.Region == "us-east-1" {
			inSmall = append(inSmall, r.ID)
		}
		if i == 20 {
			mid = explain()
		}
	}
	t.Logf("30 submitted in a burst: %v", landed)
	if len(inSmall) < 2 || landed["eu-west-1/cpu"] < 15 {
		t.Fatalf("burst landed %v: want the cheap pool used and most of it spilled to eu-west-1", landed)
	}
	var small apiv1.Candidate
	for _, c := range mid.Candidates {
		if c.Pool == "small" {
			small = c
		}
	}
	if mid.Chosen == nil || mid.Chosen.Region != "eu-west-1" || mid.Rule != "cheapest_within_wait" || !small.OverWaitTarget ||
		small.WaitTargetSeconds != maxWait.Seconds() || small.ExpectedWaitSeconds <= maxWait.Seconds() || small.TasksAhead < 1 {
		t.Fatalf("explain mid-burst: rule %q chosen %+v, small %+v", mid.Rule, mid.Chosen, small)
	}
	for _, id := range inSmall {
		tk := fed.waitState("us-east-1", tokSubmitterA, id, task.Success, time.Minute)
		if tk.StartedAt == nil {
			t.Fatalf("task %s: no started_at", id)
		}
		if w := tk.StartedAt.Sub(tk.CreatedAt); w > maxWait+time.Second {
			t.Errorf("task %s waited %v in the cheap pool, past max_wait %v", id, w, maxWait)
		}
	}
}

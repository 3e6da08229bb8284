package e2e

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Learnt durations: two regions, each with one CPU pool. The
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
		// team-c's budget is spent by one task, team-b's lowered under
		// what one task spent (budgetsThroughRealServers).
		extra:  "budget_refresh: 300ms\ntenants: {" + budgetBRaised + ", " + budgetC + "}",
		tokens: "- {name: " + tokSubmitterC + ", token: " + tokenC + ", role: submitter, tenant: team-c}",
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
	fed.tokens[tokSubmitterC] = tokenC
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
			c, err := fed.region(r).store.Tasks().Counts(context.Background())
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
			c, err := fed.region(r).store.Tasks().Counts(context.Background())
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

	// What an operator sees: `ax explain -o json` on every server, for
	// team-a's tasks (estimates are learnt per tenant).
	for _, s := range servers {
		out, stderr, code := runAx(t, s.api, "--token", fed.token(tokOperator), "explain", "--type", "exec",
			"--tag", "class=cpu", "--tenant", "team-a", "-o", "json")
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

	budgetsThroughRealServers(t, fed, servers, spec)
}

// A live price override is the price tasks record. Through real processes:
// an override put in the global etcd is what the next tasks record at
// claim, not the worker's configured price, and removing it brings the
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

// The budgets of TestSlowCheapPoolStopsWinningOnceLearnt: team-b's refuses
// past $1000, then past $0.000001 (lowered), then past $1000 again;
// team-c's caps its tasks at $0.03/slot-hour past it (the
// slow pool, $0.02, is under the cap; the fast one, $0.04, above it).
const (
	tokSubmitterC = "submitter-c" // submitter of tenant team-c (this file's federation only)
	tokenC        = "submitter-c-5f0c2a9e71d84b36"
	budgetB       = "team-b: {monthly_budget_usd: 0.000001, over_budget: refuse}"
	budgetBRaised = "team-b: {monthly_budget_usd: 1000, over_budget: refuse}"
	budgetC       = "team-c: {monthly_budget_usd: 0.000001, over_budget: cap, price_cap: 0.03}"
)

// budgetsThroughRealServers: monthly budgets on every path a tenant's work
// takes, through the real servers of both regions (two each) once every
// server places team-a's work on the fast pool (learnt).
//
// One schedule per tenant fires every second, created while the budgets
// allowed it. One task of each tenant, handed off to the fast region,
// spends team-c's budget (0.2 s at $0.04/slot-hour ≈ $0.0000022); team-b's
// is then lowered under it in the files (SIGHUP): a task whose expected
// cost is past a refuse budget is refused at admission, so no task of
// team-b's can spend a budget of $0.000001. From the next spend reads
// (budget_refresh 300ms):
//   - team-b (refuse): every server answers its submits, DAG runs (POST
//     /v1/dags and `ax dag submit`) and new schedules 429 budget_exceeded
//     naming monthly_budget_usd, and stores nothing; its schedule's slots
//     are recorded as budget_exceeded (`ax schedule get`, and
//     ax_schedule_fires_total on the leader), one per slot — not retried —
//     and no task is created for them; ax_tenant_budget_used_ratio is its
//     spend ÷ its budget on every server.
//   - team-c (cap): its submits, DAG nodes (home eu-west-1, so handed off)
//     and schedule slots carry max_price_per_slot_hour 0.03 and run in the
//     slow region, whose pool is under the cap, though every server placed
//     team-a's uncapped work on the fast one (above).
//
// Then the operator raises team-b's budget in the files and sends SIGHUP:
// its schedule fires again (a task that runs), its submits land, and the
// gauge reads the spend ÷ the new budget.
func budgetsThroughRealServers(t *testing.T, fed *federation, servers []*proc, spec map[string]any) {
	slow, fast := "us-east-1", "eu-west-1"
	start := time.Now()
	defer func() { t.Logf("budget phase: %v", time.Since(start).Round(100*time.Millisecond)) }()
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range spec {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	schedule := func(name, tenant, home string) {
		t.Helper()
		code, body := fed.call(slow, tokOperator, http.MethodPost, "/v1/schedules", map[string]any{
			"name": name, "cron": "@every 1s", "home_region": home, "task": with(map[string]any{"tenant": tenant})})
		if code != http.StatusCreated {
			t.Fatalf("schedule %s: %d %s", name, code, body)
		}
	}
	schedGet := func(name string) apiv1.ScheduleStatus {
		t.Helper()
		out, stderr, code := runAx(t, servers[0].api, "--token", fed.token(tokOperator), "schedule", "get", name, "-o", "json")
		var st apiv1.ScheduleStatus
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("ax schedule get %s: exit %d: %s %s", name, code, out, stderr)
		}
		return st
	}
	fires := func(name, outcome string) float64 {
		total := 0.0
		for _, s := range servers {
			v, _ := sum(scrape(t, s.api+"/metrics"), "ax_schedule_fires_total", map[string]string{"schedule": name, "outcome": outcome})
			total += v
		}
		return total
	}
	// spend is the tenant's spend this month from the cost report (every
	// region), with its budget as server s judges it.
	spend := func(s *proc, tenant string) (float64, apiv1.CostBudget) {
		t.Helper()
		code, body := fed.callAPI(s.api, tokOperator, http.MethodGet, "/v1/cost?group_by=tenant&tenant="+tenant, nil)
		var rep apiv1.CostReport
		if code != http.StatusOK || json.Unmarshal(body, &rep) != nil || len(rep.Budgets) != 1 || len(rep.Unavailable) > 0 {
			t.Fatalf("GET /v1/cost for %s on %s: %d %s", tenant, s.name, code, body)
		}
		return rep.Total.SpendUSD, rep.Budgets[0]
	}
	// gaugeIs waits until every server's ax_tenant_budget_used_ratio of
	// tenant is its spend (the cost report's, read just before on the same
	// server) ÷ budget.
	gaugeIs := func(tenant string, budget float64) {
		t.Helper()
		for _, s := range servers {
			var got, want float64
			waitUntil(t, 10*time.Second, "the budget gauge of "+tenant+" on "+s.name, func() bool {
				sp, b := spend(s, tenant)
				want = sp / budget
				var ok bool
				got, ok = sum(scrape(t, s.api+"/metrics"), "ax_tenant_budget_used_ratio", map[string]string{"tenant": tenant})
				return ok && sp > 0 && b.MonthlyBudgetUSD == budget && math.Abs(got-want) <= 1e-9*want &&
					math.Abs(b.UsedRatio-want) <= 1e-9*want
			})
			t.Logf("%s: ax_tenant_budget_used_ratio{tenant=%q} %.6g = spend ÷ $%g", s.name, tenant, got, budget)
		}
	}
	dag := func(name string) map[string]any {
		node := func(id string, deps ...string) map[string]any {
			return map[string]any{"id": id, "depends_on": deps, "task": spec}
		}
		return map[string]any{"name": name, "nodes": []any{node("extract"), node("load", "extract")}}
	}
	budgetErr := func(code int, body []byte) bool {
		return code == http.StatusTooManyRequests && strings.Contains(string(body), `"code":"budget_exceeded"`) &&
			strings.Contains(string(body), `"field":"monthly_budget_usd"`)
	}

	schedule("b-tick", "team-b", slow)
	schedule("c-tick", "team-c", fast)
	hb := fed.handedOffTask(slow, fast, tokSubmitterB, spec)
	hc := fed.handedOffTask(slow, fast, tokSubmitterC, spec)
	fed.waitState(slow, tokSubmitterB, hb.ID, task.Success, 20*time.Second)
	fed.waitState(slow, tokSubmitterC, hc.ID, task.Success, 20*time.Second)
	// rebudget is the operator replacing one budget line with another in
	// every region's file, then SIGHUP to every server.
	rebudget := func(from, to string) {
		t.Helper()
		for _, r := range fed.order {
			path := fed.region(r).cfgPath
			b, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(b), from) {
				t.Fatalf("%s: %v, or no %q in it", path, err, from)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(b), from, to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, s := range fed.region(r).servers {
				s.signal(syscall.SIGHUP)
			}
		}
	}
	rebudget(budgetBRaised, budgetB)
	// Through the real binary at the home of a task handed off and finished:
	// its priority cannot change (409 naming state, one line, exit 1); ax
	// schedule get prints a table, not JSON; a group given a subcommand's
	// flags without it is a usage error (it printed help, exit 0).
	out, stderr, code := runAx(t, servers[0].api, "--token", fed.token(tokOperator), "priority", hb.ID, "3")
	if code != 1 || out != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "in state SUCCESS (field state)") {
		t.Fatalf("ax priority of a finished handed-off task: exit %d:\n%s%s", code, out, stderr)
	}
	out, stderr, code = runAx(t, servers[0].api, "--token", fed.token(tokOperator), "schedule", "get", "b-tick")
	if code != 0 || !strings.Contains(out, "Name:") || !strings.Contains(out, "b-tick") || !strings.Contains(out, "Home region:") || json.Valid([]byte(out)) {
		t.Fatalf("ax schedule get b-tick (table): exit %d:\n%s%s", code, out, stderr)
	}
	if _, stderr, code = runAx(t, servers[0].api, "--token", fed.token(tokOperator), "tasks", "--state", "SUCCESS"); code != 2 || !strings.Contains(stderr, "needs a subcommand") {
		t.Fatalf("ax tasks --state SUCCESS: exit %d: %s", code, stderr)
	}

	// team-b, refuse.
	for _, s := range servers {
		waitUntil(t, 10*time.Second, "team-b's submits refused past its budget on "+s.name, func() bool {
			code, body := fed.callAPI(s.api, tokSubmitterB, http.MethodPost, "/v1/tasks", spec)
			if code == http.StatusCreated {
				return false // the spend not read yet
			}
			if !budgetErr(code, body) {
				t.Fatalf("team-b's submit to %s past its budget: %d %s", s.name, code, body)
			}
			return true
		})
		if code, body := fed.callAPI(s.api, tokSubmitterB, http.MethodPost, "/v1/dags", dag("b-run")); !budgetErr(code, body) {
			t.Fatalf("team-b's DAG run on %s past its budget: %d %s", s.name, code, body)
		}
		code, body := fed.callAPI(s.api, tokOperator, http.MethodPost, "/v1/schedules", map[string]any{
			"name": "b-more", "cron": "@every 1s", "task": with(map[string]any{"tenant": "team-b"})})
		if !budgetErr(code, body) {
			t.Fatalf("a new schedule of team-b on %s past its budget: %d %s", s.name, code, body)
		}
		if code, body := fed.callAPI(s.api, tokSubmitterA, http.MethodPost, "/v1/tasks", spec); code != http.StatusCreated {
			t.Fatalf("team-a's submit to %s beside team-b's spent budget: %d %s", s.name, code, body)
		}
	}
	dagFile := filepath.Join(t.TempDir(), "dag.json")
	if b, err := json.Marshal(dag("b-cli")); err != nil || os.WriteFile(dagFile, b, 0o600) != nil {
		t.Fatal("write the DAG file")
	}
	out, stderr, code = runAx(t, servers[0].api, "--token", fed.token(tokSubmitterB), "dag", "submit", "-f", dagFile)
	if code == 0 || out != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "monthly_budget_usd") {
		t.Fatalf("ax dag submit of team-b past its budget: exit %d, want non-zero and one line naming monthly_budget_usd:\n%s%s", code, out, stderr)
	}
	code, body := fed.call(slow, tokSubmitterB, http.MethodGet, "/v1/dags", nil)
	var runs apiv1.DAGList
	if code != http.StatusOK || json.Unmarshal(body, &runs) != nil || len(runs.Runs) != 0 {
		t.Fatalf("team-b's DAG runs after the refusals: %d %s, want none", code, body)
	}
	if code, body := fed.call(slow, tokOperator, http.MethodGet, "/v1/schedules/b-more", nil); code != http.StatusNotFound {
		t.Fatalf("team-b's refused schedule: %d %s, want 404", code, body)
	}

	// team-c, cap: whatever the server, its work goes to the pool under
	// the cap (slow), uncapped work to the fast one. (Its tasks run while
	// team-b's schedule is watched below.)
	var cIDs []string
	for _, s := range servers {
		var r struct {
			ID     string `json:"id"`
			Region string `json:"region"`
		}
		waitUntil(t, 10*time.Second, "team-c's submits capped on "+s.name, func() bool {
			code, body := fed.callAPI(s.api, tokSubmitterC, http.MethodPost, "/v1/tasks", spec)
			if code != http.StatusCreated || json.Unmarshal(body, &r) != nil {
				t.Fatalf("team-c's submit to %s past its cap budget: %d %s", s.name, code, body)
			}
			return r.Region == slow
		})
		cIDs = append(cIDs, r.ID)
	}
	// A DAG run or schedule whose task only pools above the cap match is
	// the 422 its submit gets, naming the node (nothing created).
	pinned := dag("c-pinned")
	pinned["nodes"].([]any)[1].(map[string]any)["task"] = with(map[string]any{"regions": []string{fast}})
	code, body = fed.call(slow, tokSubmitterC, http.MethodPost, "/v1/dags", pinned)
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"field":"nodes[1].task"`) ||
		!strings.Contains(string(body), "OVER_PRICE_CAP") {
		t.Fatalf("team-c's DAG with a node only above its cap: %d %s", code, body)
	}
	code, body = fed.call(slow, tokOperator, http.MethodPost, "/v1/schedules", map[string]any{"name": "c-pinned", "cron": "@every 1s",
		"task": with(map[string]any{"tenant": "team-c", "regions": []string{fast}})})
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"field":"task"`) {
		t.Fatalf("team-c's schedule only above its cap: %d %s", code, body)
	}
	code, body = fed.call(fast, tokSubmitterC, http.MethodPost, "/v1/dags", dag("c-run"))
	var run apiv1.DAGStatus
	if code != http.StatusCreated || json.Unmarshal(body, &run) != nil {
		t.Fatalf("team-c's DAG run past its cap budget: %d %s", code, body)
	}

	// team-b's schedule: each slot from now on is given up as budget_exceeded,
	// once (no task, no retry), and the slots keep coming.
	var refusedSince apiv1.ScheduleStatus
	waitUntil(t, 10*time.Second, "team-b's slots given up past its budget", func() bool {
		refusedSince = schedGet("b-tick")
		return refusedSince.LastOutcome == "budget_exceeded"
	})
	n0, t0 := fires("b-tick", "budget_exceeded"), time.Now()
	time.Sleep(2 * time.Second)
	n1, elapsed := fires("b-tick", "budget_exceeded"), time.Since(t0)
	st := schedGet("b-tick")
	if n0 < 1 || n1-n0 < 1 || n1-n0 > elapsed.Seconds()+2 || st.LastOutcome != "budget_exceeded" ||
		st.LastTaskID != refusedSince.LastTaskID || !st.LastSlot.After(*refusedSince.LastSlot) {
		t.Fatalf("team-b's schedule past its budget: %v then %v budget_exceeded slots in %v; %+v (was %+v)",
			n0, n1, elapsed, st, refusedSince)
	}
	t.Logf("team-b's schedule past its budget: %v slots given up in %v, last task still %s", n1-n0,
		elapsed.Round(100*time.Millisecond), st.LastTaskID)
	gaugeIs("team-b", 0.000001)

	for _, id := range cIDs {
		if tk := fed.waitState(slow, tokSubmitterC, id, task.Success, 20*time.Second); tk.MaxPricePerSlotHour != 0.03 {
			t.Fatalf("team-c's capped task: max_price_per_slot_hour %v, want 0.03", tk.MaxPricePerSlotHour)
		}
	}
	waitUntil(t, 30*time.Second, "team-c's DAG run "+run.ID+" ends", func() bool {
		code, body := fed.call(fast, tokSubmitterC, http.MethodGet, "/v1/dags/"+run.ID, nil)
		return code == http.StatusOK && json.Unmarshal(body, &run) == nil && run.State != task.DAGRunning
	})
	for _, nd := range run.Nodes {
		tk, _ := fed.getTask(fast, tokSubmitterC, nd.TaskID)
		if run.State != task.DAGSuccess || nd.Region != slow || tk.MaxPricePerSlotHour != 0.03 {
			t.Fatalf("team-c's DAG run %s: node %s ran in %s (max_price_per_slot_hour %v), want %s under the cap 0.03",
				run.State, nd.ID, nd.Region, tk.MaxPricePerSlotHour, slow)
		}
	}
	var capped task.Task
	waitUntil(t, 15*time.Second, "a capped slot of team-c's schedule", func() bool {
		st := schedGet("c-tick")
		if st.LastTaskID == "" {
			return false
		}
		tk, code := fed.getTask(fast, tokSubmitterC, st.LastTaskID)
		capped = tk
		return code == http.StatusOK && tk.MaxPricePerSlotHour == 0.03
	})
	if tk := fed.waitState(fast, tokSubmitterC, capped.ID, task.Success, 20*time.Second); tk.HeldBy != slow {
		t.Fatalf("team-c's capped scheduled task %s ran in %s, want %s", tk.ID, tk.HeldBy, slow)
	}
	gaugeIs("team-c", 0.000001)
	out, stderr, code = runAx(t, servers[0].api, "--token", fed.token(tokOperator), "cost")
	if code != 0 || !regexp.MustCompile(`budget team-b: \$\S+ of \$0\.000001 this month \(\d+ %, over;`).MatchString(out) ||
		!regexp.MustCompile(`budget team-c: \$\S+ of \$0\.000001 this month \(\d+ %, over;`).MatchString(out) {
		t.Fatalf("ax cost: exit %d, want team-b's and team-c's budget lines:\n%s%s", code, out, stderr)
	}

	// The operator raises team-b's budget again: SIGHUP to every server.
	rebudget(budgetB, budgetBRaised)
	var fired apiv1.ScheduleStatus
	waitUntil(t, 15*time.Second, "team-b's schedule fires again once its budget allows", func() bool {
		fired = schedGet("b-tick")
		return fired.LastOutcome == "fired" && fired.LastTaskID != refusedSince.LastTaskID
	})
	fed.waitState(slow, tokOperator, fired.LastTaskID, task.Success, 20*time.Second)
	for _, s := range servers {
		waitUntil(t, 10*time.Second, "team-b's submits land again on "+s.name, func() bool {
			code, body := fed.callAPI(s.api, tokSubmitterB, http.MethodPost, "/v1/tasks", spec)
			if code != http.StatusCreated && !budgetErr(code, body) {
				t.Fatalf("team-b's submit to %s after its budget was raised: %d %s", s.name, code, body)
			}
			return code == http.StatusCreated
		})
	}
	for _, name := range []string{"b-tick", "c-tick"} {
		if code, body := fed.call(slow, tokOperator, http.MethodDelete, "/v1/schedules/"+name, nil); code != http.StatusOK {
			t.Fatalf("delete schedule %s: %d %s", name, code, body)
		}
	}
	gaugeIs("team-b", 1000)
}

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
	"github.com/chromedp/chromedp"
)

// dashboardInBrowser drives the real dashboard of us-east-1's `ax server`
// (auth on) in a headless Chromium: sign in with an operator's token,
// search the tasks of eu-west-1 by type, open a task that us-east-1 handed
// off there, and read its trail, which names both regions; then replay a
// dead letter of eu-west-1 from the DLQ page; then watch a task's page
// turn SUCCESS live (server-sent events). One browser, a few seconds. Chromium comes from `make deps` (apt package chromium); the
// test fails when it is missing.
func dashboardInBrowser(t *testing.T, fed *federation) {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatal("chromium is not installed (make deps installs it: apt-get install chromium)")
	}
	day := time.Now().UTC().Format(time.DateOnly) // of the overview's cost (today, UTC)
	h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
		"type": "sleep", "payload": map[string]any{"ms": 10, "note": "<img src=x onerror=alert(1)>"}})
	fed.waitState("us-east-1", tokSubmitterA, h.ID, "SUCCESS", 20*time.Second)
	api := fed.server("us-east-1").api
	// A dead letter in eu-west-1, for the bulk replay.
	dead := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
		"type": "sleep", "payload": map[string]int{"ms": -1}, "max_retries": 0}) // a bad payload: FAILED
	fed.waitState("us-east-1", tokSubmitterA, dead.ID, "FAILED", 20*time.Second)
	var replayed string

	// The page needs its CSP; the token never goes into a URL.
	resp, err := http.Get(api + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("dashboard CSP: %q", csp)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	var heldBy, placed, trail, rows, url, stored, pools, refusedCells, starvingCells, costToday string
	var alerted bool
	steps := []struct {
		what, shot string
		do         []chromedp.Action
	}{
		{"open the dashboard", "", []chromedp.Action{chromedp.Navigate(api + "/"), chromedp.WaitVisible("#login-form", chromedp.ByQuery)}},
		{"sign in", "overview", []chromedp.Action{chromedp.SendKeys("#token", fed.token(tokOperatorA), chromedp.ByQuery),
			press(`#login-form button[type="submit"]`),
			chromedp.WaitVisible("h2.region", chromedp.ByQuery), // the overview, with the token
			chromedp.Text("table.pools", &pools, chromedp.ByQuery),
			chromedp.Evaluate(`[...document.querySelectorAll('table.pools td.refused')].map(e => e.textContent).join(',')`, &refusedCells),
			chromedp.Evaluate(`[...document.querySelectorAll('table.pools td.starving')].map(e => e.textContent).join(',')`, &starvingCells),
			chromedp.Text("#overview-cost", &costToday, chromedp.ByQuery)}},
		{"search eu-west-1's sleep tasks", "tasks", []chromedp.Action{chromedp.Navigate(api + "/#/tasks"),
			chromedp.WaitVisible("#task-search", chromedp.ByQuery),
			chromedp.SetValue(`#task-search input[name="type"]`, "sleep", chromedp.ByQuery),
			chromedp.SetValue(`#task-search input[name="region"]`, "eu-west-1", chromedp.ByQuery),
			press(`#task-search button[type="submit"]`),
			chromedp.WaitVisible(`#task-table a[href="#/task/`+h.ID+`"]`, chromedp.ByQuery),
			chromedp.Text("#task-table", &rows, chromedp.ByQuery)}},
		{"open the task", "", []chromedp.Action{press(`#task-table a[href="#/task/` + h.ID + `"]`),
			chromedp.WaitVisible("#trail", chromedp.ByQuery),
			chromedp.Text("#held-by", &heldBy, chromedp.ByQuery),
			chromedp.Text("#placed", &placed, chromedp.ByQuery),
			chromedp.Text("#trail", &trail, chromedp.ByQuery),
			chromedp.Location(&url),
			chromedp.Evaluate(`sessionStorage.getItem('ax.token') !== null`, &alerted),
			chromedp.Evaluate(`document.querySelector('pre').textContent`, &stored)}},
		{"replay a dead letter of eu-west-1 from the DLQ page", "dlq", []chromedp.Action{chromedp.Navigate(api + "/#/dlq?type=sleep"),
			chromedp.WaitVisible(`#dlq-table input.pick[value="`+dead.ID+`"]`, chromedp.ByQuery),
			press(`#dlq-table input.pick[value="` + dead.ID + `"]`),
			press("#replay"),
			chromedp.WaitVisible("#bulk-result.ok", chromedp.ByQuery),
			chromedp.Text("#bulk-result", &replayed, chromedp.ByQuery)}},
	}
	start := time.Now()
	// The browser starts with the first Run, on ctx: a step's shorter
	// context would end it.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("chromium (%s) does not start: %v", bin, err)
	}
	// AX_DASHBOARD_SCREENSHOTS=docs/dashboard (a directory) keeps a
	// screenshot of each page the test visits, for the README.
	shots := os.Getenv("AX_DASHBOARD_SCREENSHOTS")
	shot := func(name string) {
		if shots == "" || name == "" {
			return
		}
		var png []byte
		if err := chromedp.Run(ctx, chromedp.Sleep(300*time.Millisecond), chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(what string, do ...chromedp.Action) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
		err := chromedp.Run(sctx, do...)
		scancel()
		if err != nil {
			var html string
			_ = chromedp.Run(ctx, chromedp.OuterHTML("body", &html, chromedp.ByQuery))
			t.Fatalf("browser: %s: %v; the page: %s", what, err, html)
		}
	}
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		run(st.what, st.do...)
		shot(st.shot)
	}
	t.Logf("dashboard: signed in, searched, opened the task and read its trail in %v", time.Since(start).Round(time.Millisecond))

	// Live updates: the page of a task running in eu-west-1 turns SUCCESS
	// without a reload (the marker set on the page survives) through the
	// server-sent event stream, opened with a one-use ticket.
	slow := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
		"type": "sleep", "payload": map[string]int{"ms": 3000}})
	var sameDocument bool
	var streamURL, liveTrail string
	run("open a running task's page", chromedp.Navigate(api+"/#/task/"+slow.ID), chromedp.WaitVisible("#task-state", chromedp.ByQuery),
		chromedp.Evaluate(`window.axMarker = 1; document.querySelector('#task-state').textContent`, &liveTrail))
	if strings.Contains(liveTrail, "SUCCESS") {
		t.Fatalf("the 3 s task was done before its page opened: %q", liveTrail)
	}
	run("see it finish", chromedp.WaitVisible("#task-state .s-SUCCESS", chromedp.ByQuery),
		chromedp.Evaluate(`window.axMarker === 1 && window.axStream !== null && window.axStream.readyState === 1`, &sameDocument),
		chromedp.Evaluate(`window.axStream ? window.axStream.url : ''`, &streamURL),
		chromedp.Text("#trail", &liveTrail, chromedp.ByQuery))
	if !sameDocument || !strings.Contains(streamURL, "ticket=") || strings.Contains(streamURL, fed.token(tokOperatorA)) {
		t.Fatalf("the task page did not update live through a ticketed stream: same document %v, stream %q", sameDocument, streamURL)
	}
	if !strings.Contains(liveTrail, "SUCCESS") {
		t.Fatalf("the trail was not refreshed with the state: %q", liveTrail)
	}
	shot("task")

	// DAG runs: the listing (GET /v1/dags, every region) links a run of
	// team-a whose home is eu-west-1; its page draws the graph.
	code, body := fed.call("eu-west-1", tokSubmitterA, http.MethodPost, "/v1/dags", map[string]any{"name": "dashboard-dag", "nodes": []map[string]any{
		{"id": "extract", "task": map[string]any{"type": "sleep", "payload": map[string]int{"ms": 1}, "delay": "1h"}},
		{"id": "load", "depends_on": []string{"extract"}, "task": map[string]any{"type": "sleep"}}}})
	var dagRun struct{ ID string }
	if code != http.StatusCreated || json.Unmarshal(body, &dagRun) != nil {
		t.Fatalf("POST /v1/dags: %d %s", code, body)
	}
	var dagRows, graph string
	run("list DAG runs", chromedp.Navigate(api+"/#/dags?name=dashboard-dag"),
		chromedp.WaitVisible(`#dag-table a[href="#/dags/`+dagRun.ID+`"]`, chromedp.ByQuery),
		chromedp.Text("#dag-table", &dagRows, chromedp.ByQuery))
	shot("dags")
	run("open the run", press(`#dag-table a[href="#/dags/`+dagRun.ID+`"]`),
		chromedp.WaitVisible(".graph .node", chromedp.ByQuery), chromedp.Text(".graph", &graph, chromedp.ByQuery))
	shot("dag")
	dashboardActions(t, fed, api, dagRun.ID, run, shot)
	if !strings.Contains(dagRows, "eu-west-1") || !strings.Contains(dagRows, "1 RELEASED, 1 WAITING") {
		t.Fatalf("DAG listing: %q", dagRows)
	}
	if !strings.Contains(graph, "extract") || !strings.Contains(graph, "load") {
		t.Fatalf("DAG graph: %q", graph)
	}
	if !strings.Contains(pools, "capacity window") || !strings.Contains(pools, "always") {
		t.Fatalf("overview pools lack the capacity window column: %q", pools)
	}
	// Backpressure refusals per minute per pool, of every region's pool
	// (both regions' pools, as us-east-1's server met them: none was saturated, so 0).
	if cells := strings.Split(refusedCells, ","); !strings.Contains(pools, "refused/min") || len(cells) < 2 || slices.ContainsFunc(cells, func(c string) bool { return c != "0" }) {
		t.Fatalf("overview pools lack the refusals per minute of each pool: %q (header %q)", refusedCells, pools)
	}
	// Starvation per pool, from each region's published figures (nothing
	// waits here: 0).
	if cells := strings.Split(starvingCells, ","); !strings.Contains(pools, "starving") || len(cells) < 2 || slices.ContainsFunc(cells, func(c string) bool { return c != "0" }) {
		t.Fatalf("overview pools lack each pool's starving tasks: %q", starvingCells)
	}
	// Today's cost by tenant on the overview: team-a's tasks ran (in
	// eu-west-1, reported through us-east-1) — unless the UTC day changed
	// since (they ran yesterday).
	if !strings.Contains(costToday, "spend $") || (!strings.Contains(costToday, "team-a") && time.Now().UTC().Format(time.DateOnly) == day) {
		t.Fatalf("overview lacks today's cost of team-a: %q", costToday)
	}
	if !strings.Contains(rows, h.ID) || !strings.Contains(rows, "eu-west-1") {
		t.Fatalf("search results: %q", rows)
	}
	if !strings.Contains(placed, "eu-west-1/cpu") || !strings.Contains(placed, "handed off by us-east-1") {
		t.Fatalf("task page: the placement as recorded %q, want eu-west-1/cpu, handed off by us-east-1", placed)
	}
	if heldBy != "eu-west-1" {
		t.Fatalf("task page: held by %q, want eu-west-1", heldBy)
	}
	for _, want := range []string{"us-east-1", "eu-west-1", "HANDED_OFF", "SUCCESS"} {
		if !strings.Contains(trail, want) {
			t.Fatalf("trail lacks %s: %q", want, trail)
		}
	}
	if strings.Contains(url, fed.token(tokOperatorA)) {
		t.Fatal("the token is in the URL")
	}
	if !alerted {
		t.Fatal("no token in session storage after signing in")
	}
	if replayed != "replay: 1 of 1 done" {
		t.Fatalf("bulk replay: %q", replayed)
	}
	code, body = fed.call("us-east-1", tokSubmitterA, http.MethodGet, "/v1/tasks/"+dead.ID+"/trail", nil)
	var tr apiv1.TrailResponse
	if code != 200 || json.Unmarshal(body, &tr) != nil {
		t.Fatalf("trail of the dead letter: %d %s", code, body)
	}
	// us-east-1 forwarded the replay to eu-west-1 with the cluster token:
	// eu-west-1's trail names the operator, not the cluster.
	replayedBy := ""
	for _, s := range tr.Transitions {
		if s.Reason == task.ReasonReplayed {
			replayedBy = s.By + "@" + s.Region
		}
	}
	if replayedBy != tokOperatorA+"@eu-west-1" {
		t.Fatalf("the replay of a task in eu-west-1 through us-east-1 is recorded as %q, want %s@eu-west-1: %s", replayedBy, tokOperatorA, body)
	}
	if !strings.Contains(stored, "<img src=x onerror=alert(1)>") {
		t.Fatalf("payload not shown as text: %q", stored)
	}
}

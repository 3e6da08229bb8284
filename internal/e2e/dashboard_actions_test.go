package e2e

import (
	"encoding/json"
	"github.com/ax-sched/ax/apiv1"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// dashboardActions drives the dashboard's writes in the browser signed in
// with an operator's token of team-a: a task's priority and cancel from
// its page, a schedule's pause, a DAG run's cancel (its graph draws the
// edge, and its node that never ran links nowhere), each confirmed first
// and checked through the API; the workers and budgets views; the
// overview's history charts; then, signed
// in as a submitter, a cancel that the API refuses (403) changes nothing.
func dashboardActions(t *testing.T, fed *federation, api, dagRun string, run func(string, ...chromedp.Action), shot func(string)) {
	t.Helper()
	get := func(path string, v any) {
		t.Helper()
		code, body := fed.call("us-east-1", tokOperatorA, http.MethodGet, path, nil)
		if code != http.StatusOK || json.Unmarshal(body, v) != nil {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	submit := func() string {
		t.Helper()
		code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", map[string]any{"type": "sleep", "delay": "1h", "regions": []string{"us-east-1"}})
		var sr struct{ ID string }
		if code != http.StatusCreated || json.Unmarshal(body, &sr) != nil {
			t.Fatalf("submit: %d %s", code, body)
		}
		return sr.ID
	}
	// An action: the button, the confirmation, and its result, which
	// shows once the page has re-rendered with the outcome.
	confirm := func(click chromedp.Action) []chromedp.Action {
		return []chromedp.Action{click, chromedp.WaitVisible("#confirm", chromedp.ByQuery),
			press("#confirm-yes"), chromedp.WaitVisible("#action-result.ok", chromedp.ByQuery)}
	}

	// A task's page: priority 3, then cancel. The page re-renders as the
	// stream and the actions change the task: every click finds its
	// button afresh (press), and the cancel waits for the page drawn with
	// priority 3 (the option selected in the markup, not the one set).
	id := submit()
	run("open a waiting task", chromedp.Navigate(api+"/#/task/"+id), chromedp.WaitVisible("#task-actions", chromedp.ByQuery))
	run("set its priority", append(confirm(pressWith("#act-priority", `document.querySelector('#act-prio').value = '3';`)),
		chromedp.Poll(`document.querySelector('#act-prio option[selected]')?.textContent === '3'`, nil, chromedp.WithPollingInterval(50*time.Millisecond)))...)
	var tk struct {
		Priority int
		State    string
	}
	get("/v1/tasks/"+id, &tk)
	if tk.Priority != 3 {
		t.Fatalf("after Set priority 3 in the dashboard: priority %d", tk.Priority)
	}
	run("cancel it", append(confirm(press("#act-cancel")), chromedp.WaitVisible("#task-state .s-CANCELED", chromedp.ByQuery))...)
	shot("task-actions")
	get("/v1/tasks/"+id, &tk)
	if tk.State != "CANCELED" {
		t.Fatalf("after Cancel in the dashboard: %s", tk.State)
	}

	// A schedule paused from the schedules page.
	code, body := fed.call("us-east-1", tokOperatorA, http.MethodPost, "/v1/schedules", map[string]any{
		"name": "dash-nightly", "cron": "0 0 3 * * *", "task": map[string]any{"type": "sleep"}})
	if code != http.StatusCreated {
		t.Fatalf("create a schedule: %d %s", code, body)
	}
	toggle := `.sched-toggle[data-name="dash-nightly"]`
	run("pause the schedule", append([]chromedp.Action{chromedp.Navigate(api + "/#/schedules"), chromedp.WaitVisible(toggle, chromedp.ByQuery)},
		append(confirm(press(toggle)), chromedp.WaitVisible(toggle+`[data-op="resume"]`, chromedp.ByQuery))...)...)
	shot("schedules")
	var sched struct{ Paused bool }
	get("/v1/schedules/dash-nightly", &sched)
	if !sched.Paused {
		t.Fatal("the schedule paused in the dashboard is not paused")
	}

	scheduleGrid(t, fed, api, run, shot)

	// The DAG run: one edge extract → load; load never ran: no task link.
	var edges, loadRow string
	run("open the DAG run", chromedp.Navigate(api+"/#/dags/"+dagRun), chromedp.WaitVisible("#dag-edges line", chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('#dag-edges line')].map(l => l.dataset.edge).join(',')`, &edges),
		chromedp.Evaluate(`[...document.querySelectorAll('#dag table tr')].find(r => r.cells[0].textContent === 'load').innerHTML`, &loadRow))
	if edges != "extract>load" || strings.Contains(loadRow, "task-link") || !strings.Contains(loadRow, "not run") {
		t.Fatalf("DAG graph: edges %q, load's row %q: want the edge extract>load and no link for a node that never ran", edges, loadRow)
	}
	run("cancel the DAG run", confirm(press("#dag-cancel"))...)
	// The cancel is recorded at once; the run ends once its nodes have.
	waitUntil(t, 15*time.Second, "the DAG run canceled in the dashboard to end CANCELED", func() bool {
		var dag struct{ State string }
		code, body := fed.call("eu-west-1", tokOperatorA, http.MethodGet, "/v1/dags/"+dagRun, nil)
		return code == http.StatusOK && json.Unmarshal(body, &dag) == nil && dag.State == "CANCELED"
	})

	// A batch of two members, one handed off to eu-west-1, both waiting an
	// hour: listed (home us-east-1), its page, then canceled from it.
	code, body = fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/batches", map[string]any{"name": "dash-batch",
		"tasks": []any{map[string]any{"type": "sleep", "delay": "1h", "regions": []string{"us-east-1"}},
			map[string]any{"type": "sleep", "delay": "1h", "regions": []string{"eu-west-1"}}},
		"on_complete": map[string]any{"type": "noop"}})
	var bt struct{ ID string }
	if code != http.StatusCreated || json.Unmarshal(body, &bt) != nil {
		t.Fatalf("create a batch: %d %s", code, body)
	}
	var batchRow string
	row := `#batch-table a.batch-link[href="#/batches/` + bt.ID + `"]`
	run("the batches view", chromedp.Navigate(api+"/#/batches"), chromedp.WaitVisible(row, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('`+row+`').closest('tr').textContent`, &batchRow))
	if !strings.Contains(batchRow, "dash-batch") || !strings.Contains(batchRow, "us-east-1") || !strings.Contains(batchRow, "2: 0 succeeded") {
		t.Fatalf("batches view row %q: want its name, home us-east-1 and 2 members", batchRow)
	}
	run("open the batch and cancel it", append([]chromedp.Action{chromedp.Navigate(api + "/#/batches/" + bt.ID), chromedp.WaitVisible("#batch-cancel", chromedp.ByQuery)},
		append(confirm(press("#batch-cancel")), chromedp.WaitVisible("#batch .bad", chromedp.ByQuery))...)...)
	shot("batch")
	waitUntil(t, 20*time.Second, "the batch canceled in the dashboard to complete with 2 canceled", func() bool {
		var st apiv1.BatchStatus
		code, body := fed.call("eu-west-1", tokOperatorA, http.MethodGet, "/v1/batches/"+bt.ID, nil)
		return code == http.StatusOK && json.Unmarshal(body, &st) == nil && st.State == apiv1.BatchCompleted && st.Counts.Canceled == 2
	})

	// The workers and budgets views.
	var workers, budgets string
	run("the workers view", chromedp.Navigate(api+"/#/workers"), chromedp.WaitVisible("#workers", chromedp.ByQuery), chromedp.Text("#workers", &workers, chromedp.ByQuery))
	shot("workers")
	run("the budgets view", chromedp.Navigate(api+"/#/budgets"), chromedp.WaitVisible("#budgets", chromedp.ByQuery), chromedp.Text("main", &budgets, chromedp.ByQuery))
	for _, want := range []string{"us-east-1", "eu-west-1", "live workers"} {
		if !strings.Contains(workers, want) {
			t.Fatalf("workers view lacks %q: %q", want, workers)
		}
	}
	if !strings.Contains(budgets, "Budgets") {
		t.Fatalf("budgets view: %q", budgets)
	}

	// The overview's history charts (GET /v1/history, a sample every 15 s):
	// each region's queue depth, each pool's fill, the throughput, the
	// ready→start p99 and today's spend, drawn from two samples at least.
	// The p99 needs claims in the last minute: eight short tasks handed to
	// eu-west-1 one after another, each its own claim there.
	for range 8 {
		id, _ := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "sleep", "payload": map[string]int{"ms": 1}, "regions": []string{"eu-west-1"}})
		waitUntil(t, 20*time.Second, "a short task handed to eu-west-1 to succeed", func() bool {
			var st struct{ State string }
			code, body := fed.call("us-east-1", tokOperatorA, http.MethodGet, "/v1/tasks/"+id, nil)
			return code == http.StatusOK && json.Unmarshal(body, &st) == nil && st.State == "SUCCESS"
		})
	}
	waitUntil(t, 60*time.Second, "two history samples with the regions, one with eu-west-1's ready→start p99", func() bool {
		var h apiv1.HistoryResponse
		code, body := fed.call("us-east-1", tokOperatorA, http.MethodGet, "/v1/history", nil)
		n, waits := 0, 0
		if code == http.StatusOK && json.Unmarshal(body, &h) == nil {
			for _, s := range h.Samples {
				if len(s.Regions) > 0 {
					n++
				}
				for _, r := range s.Regions {
					for _, p := range r.Pools {
						if r.Name == "eu-west-1" && p.WaitP99Seconds != nil {
							waits++
						}
					}
				}
			}
		}
		return n >= 2 && waits >= 1
	})
	var lines string
	run("the history charts", chromedp.Navigate(api+"/#/"), chromedp.WaitVisible("#chart-depth polyline", chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('.chart polyline')].map(l => l.closest('figure').id + '|' + l.dataset.series + '|' + l.dataset.points + '|' + l.dataset.last).join('\n')`, &lines))
	shot("charts")
	series := map[string][]string{}
	for _, l := range strings.Split(lines, "\n") {
		if f := strings.Split(l, "|"); len(f) == 4 {
			series[f[0]+" "+f[1]] = f[2:]
		}
	}
	for _, want := range []string{"chart-depth us-east-1 ready", "chart-depth eu-west-1 ready", "chart-depth eu-west-1 running", "chart-fill us-east-1/cpu", "chart-fill eu-west-1/cpu",
		"chart-throughput finished/min (this region)", "chart-throughput submitted/min (this server)", "chart-spend spend today $ (team-a)", "chart-wait eu-west-1/cpu"} {
		if v, ok := series[want]; !ok || v[0] == "1" && !strings.HasPrefix(want, "chart-throughput") && !strings.HasPrefix(want, "chart-wait") {
			t.Fatalf("history charts: no line %q of two points or more: %q", want, lines)
		}
	}
	if sp := series["chart-spend spend today $ (team-a)"]; sp[1] == "0" && time.Now().UTC().Hour() > 0 {
		t.Fatalf("history charts: team-a's spend today is 0 after its tasks ran: %q", lines)
	}

	// A submitter's token: the buttons are there, the API refuses, nothing changes.
	id = submit()
	var refused string
	run("cancel as a submitter", chromedp.Evaluate(`sessionStorage.setItem('ax.token', `+jsString(fed.token(tokSubmitterA))+`)`, nil),
		chromedp.Navigate(api+"/#/task/"+id), press("#act-cancel"), chromedp.WaitVisible("#confirm", chromedp.ByQuery), press("#confirm-yes"), chromedp.WaitVisible("#action-result.bad", chromedp.ByQuery), chromedp.Text("#action-result", &refused, chromedp.ByQuery))
	get("/v1/tasks/"+id, &tk)
	if tk.State != "PENDING" || !strings.Contains(refused, "role") {
		t.Fatalf("a submitter's cancel from the dashboard: %q, the task %s; want refused and PENDING", refused, tk.State)
	}
	run("sign back in as the operator", chromedp.Evaluate(`sessionStorage.setItem('ax.token', `+jsString(fed.token(tokOperatorA))+`)`, nil))
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// press clicks the visible element sel matches, found and clicked in one
// step inside the page: a re-render between finding the element and
// clicking it cannot leave the test holding a node the page dropped.
func press(sel string) chromedp.Action { return pressWith(sel, "") }

// pressWith runs js (which may set the form's fields) just before the
// click, in the same step.
func pressWith(sel, js string) chromedp.Action {
	return chromedp.Poll(`(() => { const e = document.querySelector(`+jsString(sel)+`);
		if (!e || !e.isConnected || e.offsetParent === null) return false; `+js+` e.click(); return true; })()`,
		nil, chromedp.WithPollingInterval(50*time.Millisecond))
}

// scheduleGrid: a DAG schedule firing every 2 s (clean placed in
// eu-west-1, check failing, load cancelled by it) shows its periods ×
// nodes on its page, each cell the node's state in that period's run and
// a link to the node's task when it has one; a bad periods is 400.
func scheduleGrid(t *testing.T, fed *federation, api string, run func(string, ...chromedp.Action), shot func(string)) {
	t.Helper()
	nd := func(id string, payload map[string]any, deps []string, extra map[string]any) map[string]any {
		tk := map[string]any{"type": "sleep", "payload": payload, "max_retries": 0}
		for k, v := range extra {
			tk[k] = v
		}
		return map[string]any{"id": id, "depends_on": deps, "task": tk}
	}
	ok := map[string]any{"ms": 10, "day": "{{period_start}}"}
	code, body := fed.call("us-east-1", tokOperatorA, http.MethodPost, "/v1/schedules", map[string]any{
		"name": "dash-grid", "cron": "*/2 * * * * *", "misfire": "skip", "home_region": "us-east-1",
		"dag": map[string]any{"name": "dash-grid", "nodes": []any{
			nd("extract", ok, nil, nil), nd("clean", ok, []string{"extract"}, map[string]any{"regions": []string{"eu-west-1"}}),
			nd("check", map[string]any{"ms": -1}, []string{"extract"}, nil), nd("load", ok, []string{"clean", "check"}, nil)}}})
	if code != http.StatusCreated {
		t.Fatalf("create a DAG schedule: %d %s", code, body)
	}
	defer fed.call("us-east-1", tokOperatorA, http.MethodDelete, "/v1/schedules/dash-grid", nil)
	var grid struct {
		Nodes   []string
		Periods []struct {
			RunID string `json:"run_id"`
			State string
			Cells []struct {
				State, Reason string
				TaskID        string `json:"task_id"`
			}
		}
	}
	ended := 0
	waitUntil(t, 40*time.Second, "3 ended runs of dash-grid in its grid", func() bool {
		code, body := fed.call("eu-west-1", tokOperatorA, http.MethodGet, "/v1/schedules/dash-grid/grid?periods=8", nil)
		if code != http.StatusOK || json.Unmarshal(body, &grid) != nil {
			t.Fatalf("GET grid: %d %s", code, body)
		}
		ended = 0
		for _, p := range grid.Periods {
			if p.State == "FAILED" {
				ended++
			}
		}
		return ended >= 3
	})
	if code, body := fed.call("us-east-1", tokOperatorA, http.MethodPost, "/v1/schedules/dash-grid/pause", nil); code != http.StatusOK {
		t.Fatalf("pause dash-grid: %d %s", code, body)
	}
	if strings.Join(grid.Nodes, ",") != "extract,clean,check,load" {
		t.Fatalf("grid nodes %v", grid.Nodes)
	}
	for _, p := range grid.Periods {
		if p.State != "FAILED" {
			continue
		}
		want := []string{"SUCCESS", "SUCCESS", "FAILED", "CANCELED"}
		for i, c := range p.Cells {
			if c.State != want[i] || (c.TaskID == "") != (i == 3) {
				t.Errorf("grid period of run %s, node %s: %s %s task %q, want %s (load: no task)", p.RunID, grid.Nodes[i], c.State, c.Reason, c.TaskID, want[i])
			}
		}
	}
	if code, body := fed.call("us-east-1", tokOperatorA, http.MethodGet, "/v1/schedules/dash-grid/grid?periods=0", nil); code != http.StatusBadRequest || !strings.Contains(string(body), `"periods"`) {
		t.Errorf("grid?periods=0: %d %s, want 400 naming periods", code, body)
	}
	var cells string
	// The page asks for 50 periods (100 s, the whole test): slots go on
	// appearing (empty) after the pause, and a window of 8 may have moved
	// past the oldest ended run by the time the page loads.
	run("the schedule's grid", chromedp.Navigate(api+"/#/schedules/dash-grid?tenant=team-a&periods=50"), chromedp.WaitVisible("#grid td.g-cell", chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('#grid td.g-cell')].filter(c => c.dataset.state).map(c => c.dataset.node + '=' + c.dataset.state + (c.querySelector('a.task-link') ? '+link' : '')).join(',')`, &cells))
	shot("schedule-grid")
	got := map[string]int{}
	for _, c := range strings.Split(cells, ",") {
		got[c]++
	}
	for _, want := range []string{"extract=SUCCESS+link", "clean=SUCCESS+link", "check=FAILED+link", "load=CANCELED"} {
		if got[want] < ended {
			t.Errorf("grid page cells %q: %q %d times, want %d at least (one per ended run)", cells, want, got[want], ended)
		}
	}
}

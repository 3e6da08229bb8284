package e2e

import (
	"encoding/json"
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
	// each region's queue depth, each pool's fill, the throughput and
	// today's spend, drawn
	// from two samples at least.
	waitUntil(t, 45*time.Second, "two history samples with the regions", func() bool {
		var h struct {
			Samples []struct{ Regions []json.RawMessage }
		}
		code, body := fed.call("us-east-1", tokOperatorA, http.MethodGet, "/v1/history", nil)
		n := 0
		if code == http.StatusOK && json.Unmarshal(body, &h) == nil {
			for _, s := range h.Samples {
				if len(s.Regions) > 0 {
					n++
				}
			}
		}
		return n >= 2
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
		"chart-throughput finished/min (this region)", "chart-throughput submitted/min (this server)", "chart-spend spend today $ (team-a)"} {
		if v, ok := series[want]; !ok || v[0] == "1" && !strings.HasPrefix(want, "chart-throughput") {
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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// pipelines drives schedules of DAGs through one server of a federation
// (api: swapped when that server is killed).
type pipelines struct {
	fed *federation
	t   *testing.T
	api string
	tok string
}

func (p *pipelines) on(t *testing.T) *pipelines {
	q := *p
	q.t, q.fed = t, p.fed.on(t)
	return &q
}

func (p *pipelines) call(method, path string, body any, want int, out any) []byte {
	p.t.Helper()
	code, b := p.fed.callAPI(p.api, p.tok, method, path, body)
	if code != want {
		p.t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			p.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return b
}

// refused posts a schedule that must be refused 400 naming field; the
// schedule then does not exist.
func (p *pipelines) refused(body map[string]any, field string) {
	p.t.Helper()
	code, b := p.fed.callAPI(p.api, p.tok, http.MethodPost, "/v1/schedules", body)
	var e struct{ Error apiv1.Error }
	_ = json.Unmarshal(b, &e)
	if code != http.StatusBadRequest || e.Error.Field != field || e.Error.Message == "" {
		p.t.Errorf("schedule %v: %d %s, want 400 naming %s", body["name"], code, b, field)
	}
	if code, _ := p.fed.callAPI(p.api, p.tok, http.MethodGet, "/v1/schedules/"+body["name"].(string), nil); code != http.StatusNotFound {
		p.t.Errorf("refused schedule %v: GET %d, want 404", body["name"], code)
	}
}

// runs reads every DAG run of schedule name (its DAG is named after it),
// oldest period first, from a listing every region answered: GET /v1/dags
// answers 200 without a region that did not answer in time (unavailable[],
// as under load), which is read again rather than taken as no runs.
func (p *pipelines) runs(name string) []apiv1.DAGStatus {
	p.t.Helper()
	var out []apiv1.DAGStatus
	waitUntil(p.t, 30*time.Second, "a listing of "+name+"'s runs that every region answered", func() bool {
		var ok bool
		out, ok = p.listRuns(name)
		return ok
	})
	return out
}

// listRuns is one reading of runs; false when a region did not answer.
func (p *pipelines) listRuns(name string) ([]apiv1.DAGStatus, bool) {
	p.t.Helper()
	var out []apiv1.DAGStatus
	cursor := ""
	for {
		q := url.Values{"name": {name}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var list apiv1.DAGList
		p.call(http.MethodGet, "/v1/dags?"+q.Encode(), nil, http.StatusOK, &list)
		if len(list.Unavailable) > 0 {
			p.t.Logf("GET /v1/dags?%s: regions %v did not answer; reading again", q.Encode(), list.Unavailable)
			return nil, false
		}
		for _, s := range list.Runs {
			var st apiv1.DAGStatus
			p.call(http.MethodGet, "/v1/dags/"+s.ID, nil, http.StatusOK, &st)
			if st.Schedule == name {
				out = append(out, st)
			}
		}
		if list.NextCursor == "" {
			break
		}
		cursor = list.NextCursor
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Period.Start.Before(out[j].Period.Start) })
	return out, true
}

func (p *pipelines) task(id string) task.Task {
	p.t.Helper()
	var tk task.Task
	p.call(http.MethodGet, "/v1/tasks/"+id, nil, http.StatusOK, &tk)
	return tk
}

func (p *pipelines) backfill(name, id string) apiv1.Backfill {
	p.t.Helper()
	var list apiv1.BackfillList
	p.call(http.MethodGet, "/v1/schedules/"+name+"/backfills", nil, http.StatusOK, &list)
	for _, bf := range list.Backfills {
		if bf.ID == id {
			return bf
		}
	}
	p.t.Fatalf("backfill %s of %s not listed", id, name)
	return apiv1.Backfill{}
}

// node is a DAG node sleeping ms with its period in its payload; regions
// pins it.
func node(id string, ms int, deps []string, regions ...string) map[string]any {
	tk := map[string]any{"type": "sleep", "tags": map[string]string{"class": "cpu"},
		"payload": map[string]any{"ms": ms, "node": id, "period_start": "{{period_start}}", "period_end": "{{period_end}}"}}
	if len(regions) > 0 {
		tk["regions"] = regions
	}
	return map[string]any{"id": id, "depends_on": deps, "task": tk}
}

// diamondOf is the warehouse pipeline: extract, then clean (in region
// away) and stats, then load.
func diamondOf(name string, ms int, away string) map[string]any {
	return map[string]any{"name": name, "nodes": []any{
		node("extract", ms, nil), node("clean", ms, []string{"extract"}, away),
		node("stats", ms, []string{"extract"}), node("load", ms, []string{"clean", "stats"})}}
}

// maxOverlap is the most runs whose [created_at, finished_at] overlap.
func maxOverlap(runs []apiv1.DAGStatus) int {
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	for _, r := range runs {
		evs = append(evs, ev{r.CreatedAt, 1}, ev{*r.FinishedAt, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].d < evs[j].d // an end before a start at the same instant
		}
		return evs[i].at.Before(evs[j].at)
	})
	n, most := 0, 0
	for _, e := range evs {
		n += e.d
		most = max(most, n)
	}
	return most
}

// Pipelines on a clock through real processes (two regions of two
// servers, auth on): a schedule starts a diamond DAG per slot with its
// period in every task, one node placed in the other region; another
// schedule's node waits for the first's run of the same period; a
// latest_success dependency on a run too old fails at once; a backfill of
// 20 periods with --max-active 3 runs them oldest first, never more than 3
// at once; a backfill is cancelled; the federation leader SIGKILLed
// mid-backfill neither repeats nor loses a period.
func TestSchedulePipelines(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: a federation of four servers")
	}
	const home, away = "us-east-1", "eu-west-1"
	fed := newFederation(t, fedOpts{servers: 2, extra: "quotas:\n  tenants:\n    team-a: {max_backfill_periods: 40}\n"})
	pl := &pipelines{fed: fed, t: t, api: fed.region(home).servers[1].api, tok: tokOperatorA}
	every2s := "*/2 * * * * *"

	t.Run("bad input", func(t *testing.T) {
		p := pl.on(t)
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "cyc-b", "cron": every2s, "paused": true,
			"dag": map[string]any{"nodes": []any{node("x", 1, nil)}}}, http.StatusCreated, nil)
		dep := func(name, up string) map[string]any {
			n := node("x", 1, nil)
			n["depends_on_schedules"] = []any{map[string]any{"schedule": up, "rule": "same_period"}}
			return map[string]any{"name": name, "cron": every2s, "paused": true, "dag": map[string]any{"nodes": []any{n}}}
		}
		p.call(http.MethodPost, "/v1/schedules", dep("cyc-a", "cyc-b"), http.StatusCreated, nil)
		p.call(http.MethodDelete, "/v1/schedules/cyc-b", nil, http.StatusOK, nil)
		const f = "dag.nodes[0].depends_on_schedules[0].schedule"
		p.refused(dep("cyc-b", "cyc-a"), f) // cyc-b -> cyc-a -> cyc-b
		p.refused(dep("selfish", "selfish"), f)
		p.refused(dep("orphan", "no-such-schedule"), f)
		single := map[string]any{"name": "single-orphan", "cron": every2s, "paused": true, "task": map[string]any{"type": "noop"},
			"depends_on_schedules": []any{map[string]any{"schedule": "no-such-schedule", "rule": "latest_success"}}}
		p.refused(single, "depends_on_schedules[0].schedule")
		both := dep("both", "cyc-a")
		both["depends_on_schedules"] = single["depends_on_schedules"]
		p.refused(both, "depends_on_schedules")
		bad := dep("rule", "cyc-a")
		bad["dag"].(map[string]any)["nodes"].([]any)[0].(map[string]any)["depends_on_schedules"].([]any)[0].(map[string]any)["rule"] = "whenever"
		p.refused(bad, "dag.nodes[0].depends_on_schedules[0].rule")
		code, b := p.fed.callAPI(p.api, p.tok, http.MethodPost, "/v1/dags", dep("x", "cyc-a")["dag"])
		if code != http.StatusBadRequest || !strings.Contains(string(b), `"nodes[0].depends_on_schedules"`) {
			t.Errorf("POST /v1/dags with depends_on_schedules: %d %s, want 400 naming nodes[0].depends_on_schedules", code, b)
		}
		for _, c := range []struct {
			req   map[string]any
			field string
		}{
			{map[string]any{"from": "2026-01-03", "to": "2026-01-01"}, "from"},
			{map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:01:20Z"}, "to"}, // 41 periods > 40
		} {
			code, b := p.fed.callAPI(p.api, p.tok, http.MethodPost, "/v1/schedules/cyc-a/backfill", c.req)
			var e struct{ Error apiv1.Error }
			_ = json.Unmarshal(b, &e)
			if code != http.StatusBadRequest || e.Error.Field != c.field {
				t.Errorf("backfill %v: %d %s, want 400 naming %s", c.req, code, b, c.field)
			}
		}
		var list apiv1.BackfillList
		p.call(http.MethodGet, "/v1/schedules/cyc-a/backfills", nil, http.StatusOK, &list)
		if len(list.Backfills) != 0 {
			t.Errorf("refused backfills left %d backfills", len(list.Backfills))
		}
		p.call(http.MethodDelete, "/v1/schedules/cyc-a", nil, http.StatusOK, nil)
	})

	t.Run("diamond per slot and same_period", func(t *testing.T) {
		p := pl.on(t)
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "wh", "cron": every2s, "misfire": "skip",
			"home_region": home, "dag": diamondOf("wh", 150, away)}, http.StatusCreated, nil)
		publish := node("publish", 50, []string{"prep"})
		publish["depends_on_schedules"] = []any{map[string]any{"schedule": "wh", "rule": "same_period", "timeout": "30s"}}
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "report", "cron": every2s, "misfire": "skip",
			"home_region": away, "dag": map[string]any{"name": "report", "nodes": []any{node("prep", 10, nil), publish}}}, http.StatusCreated, nil)
		var wh, report []apiv1.DAGStatus
		ended := func(runs []apiv1.DAGStatus) []apiv1.DAGStatus {
			return slices.DeleteFunc(runs, func(r apiv1.DAGStatus) bool { return r.State == task.DAGRunning })
		}
		waitUntil(t, 60*time.Second, "3 ended runs of report", func() bool {
			report = ended(p.runs("report"))
			return len(report) >= 3
		})
		p.call(http.MethodDelete, "/v1/schedules/report", nil, http.StatusOK, nil)
		p.call(http.MethodDelete, "/v1/schedules/wh", nil, http.StatusOK, nil)
		wh = ended(p.runs("wh"))
		byPeriod := map[time.Time]apiv1.DAGStatus{}
		for _, r := range wh {
			if r.State != task.DAGSuccess || r.Region != home || r.Period.End.Sub(r.Period.Start) != 2*time.Second {
				t.Errorf("wh run %s: %s in %s, period %v, want SUCCESS in %s over 2s", r.ID, r.State, r.Region, r.Period, home)
			}
			if _, dup := byPeriod[r.Period.Start]; dup {
				t.Errorf("two wh runs of period %v", r.Period.Start)
			}
			byPeriod[r.Period.Start] = r
			for _, n := range r.Nodes {
				tk := p.task(n.TaskID)
				want := fmt.Sprintf(`"period_start":"%s"`, r.Period.Start.UTC().Format(time.RFC3339))
				wantEnd := fmt.Sprintf(`"period_end":"%s"`, r.Period.End.UTC().Format(time.RFC3339))
				if !strings.Contains(string(tk.Payload), want) || !strings.Contains(string(tk.Payload), wantEnd) {
					t.Errorf("wh run %s node %s: payload %s, want %s", r.ID, n.ID, tk.Payload, want)
				}
				if n.ID == "clean" && n.Region != away {
					t.Errorf("wh run %s: clean ran in %q, want %s", r.ID, n.Region, away)
				}
			}
		}
		var lags []time.Duration
		held := 0
		for _, r := range report {
			pub := r.Nodes[1]
			if r.State != task.DAGSuccess || pub.State != task.NodeSuccess || len(pub.Gates) != 1 {
				t.Errorf("report run %s: %s, publish %s (%s) gates %+v", r.ID, r.State, pub.State, pub.Reason, pub.Gates)
				continue
			}
			g := pub.Gates[0]
			up, ok := byPeriod[r.Period.Start]
			if !ok || g.RunID != up.ID || g.Period == nil || !g.Period.Equal(r.Period.Start) {
				t.Errorf("report run %s of %v waits for %+v, want wh's run of its period (%s)", r.ID, r.Period.Start, g, up.ID)
				continue
			}
			started := p.task(pub.TaskID).CreatedAt
			if started.Before(*up.FinishedAt) {
				t.Errorf("report run %s: publish started %v, before wh's run %s succeeded (%v)", r.ID, started, up.ID, *up.FinishedAt)
			}
			// Under load prep may itself end after wh's run (its run
			// started late): then the gate held nothing back for it.
			if prep := p.task(r.Nodes[0].TaskID); prep.FinishedAt != nil && prep.FinishedAt.Before(*up.FinishedAt) {
				held++
			}
			lags = append(lags, started.Sub(*up.FinishedAt))
		}
		if held == 0 {
			t.Errorf("no report run's prep ended before wh's run of its period: no run shows publish waiting for the gate")
		}
		t.Logf("%d wh runs, %d report runs (%d held by the gate after prep); publish created after wh's run of its period succeeded by %v",
			len(wh), len(report), held, lags)
	})

	t.Run("latest_success and timeouts", func(t *testing.T) {
		p := pl.on(t)
		// hourly's one success: a backfill of its latest slot.
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "hourly", "cron": "0 0 * * * *", "paused": true,
			"home_region": away, "task": map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}}}, http.StatusCreated, nil)
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "yearly", "cron": "0 0 0 1 1 *", "paused": true,
			"dag": map[string]any{"nodes": []any{node("x", 1, nil)}}}, http.StatusCreated, nil)
		slot := time.Now().UTC().Truncate(time.Hour).Format(time.RFC3339)
		var bf apiv1.Backfill
		p.call(http.MethodPost, "/v1/schedules/hourly/backfill", map[string]any{"from": slot, "to": slot}, http.StatusCreated, &bf)
		waitUntil(t, 30*time.Second, "hourly's backfill done", func() bool { return p.backfill("hourly", bf.ID).State == apiv1.BackfillDone })
		bf = p.backfill("hourly", bf.ID)
		up := p.fed.waitState(away, p.tok, bf.Runs[0].ID, task.Success, 20*time.Second)
		time.Sleep(time.Until(up.FinishedAt.Add(1500 * time.Millisecond)))
		dep := func(id, up, rule string, extra map[string]any) map[string]any {
			n := node(id, 10, nil)
			d := map[string]any{"schedule": up, "rule": rule}
			for k, v := range extra {
				d[k] = v
			}
			n["depends_on_schedules"] = []any{d}
			return n
		}
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "checks", "cron": every2s, "misfire": "skip", "home_region": home,
			"dag": map[string]any{"name": "checks", "nodes": []any{
				dep("strict", "hourly", "latest_success", map[string]any{"max_age": "1s"}),
				dep("lenient", "hourly", "latest_success", map[string]any{"max_age": "2h"}),
				dep("covered", "hourly", "same_period", nil),
				dep("late", "yearly", "same_period", map[string]any{"timeout": "2s", "on_timeout": "skip"}),
				node("after", 10, []string{"strict"}),
			}}}, http.StatusCreated, nil)
		// A single-task schedule with a dependency: each slot a one-node run.
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "single", "cron": every2s, "misfire": "skip", "home_region": away,
			"task":                 map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}, "payload": map[string]any{"day": "{{period_date}}"}},
			"depends_on_schedules": []any{map[string]any{"schedule": "hourly", "rule": "latest_success", "max_age": "2h"}}}, http.StatusCreated, nil)
		var run apiv1.DAGStatus
		waitUntil(t, 30*time.Second, "a run of single ended", func() bool {
			for _, r := range p.runs("single") {
				if r.State != task.DAGRunning {
					run = r
					return true
				}
			}
			return false
		})
		p.call(http.MethodDelete, "/v1/schedules/single", nil, http.StatusOK, nil)
		if n := run.Nodes; run.State != task.DAGSuccess || len(n) != 1 || n[0].ID != "task" || len(n[0].Gates) != 1 || n[0].Gates[0].RunID != bf.Runs[0].ID {
			t.Errorf("single's run %s: %s, nodes %+v; want SUCCESS, one node gated on hourly's run %s", run.ID, run.State, run.Nodes, bf.Runs[0].ID)
		} else if tk := p.task(n[0].TaskID); !strings.Contains(string(tk.Payload), run.Period.Start.UTC().Format(time.DateOnly)) {
			t.Errorf("single's task payload %s, want its period's date", tk.Payload)
		}
		waitUntil(t, 30*time.Second, "a run of checks ended", func() bool {
			for _, r := range p.runs("checks") {
				if r.State != task.DAGRunning {
					run = r
					return true
				}
			}
			return false
		})
		p.call(http.MethodDelete, "/v1/schedules/checks", nil, http.StatusOK, nil)
		want := map[string][2]string{
			"strict":  {string(task.NodeFailed), task.ReasonUpstreamStale},
			"lenient": {string(task.NodeSuccess), task.ReasonCompleted},
			"covered": {string(task.NodeSuccess), task.ReasonCompleted},
			"late":    {string(task.NodeSkipped), task.ReasonUpstreamTimeout},
			"after":   {string(task.NodeCanceled), task.ReasonUpstreamFailed},
		}
		if run.State != task.DAGFailed {
			t.Errorf("checks run %s: %s, want FAILED (strict)", run.ID, run.State)
		}
		for _, n := range run.Nodes {
			if w := want[n.ID]; string(n.State) != w[0] || n.Reason != w[1] {
				t.Errorf("checks node %s: %s %s, want %s %s (gates %+v)", n.ID, n.State, n.Reason, w[0], w[1], n.Gates)
			}
			if n.ID == "strict" {
				if n.TaskState != "" || n.UpdatedAt == nil {
					t.Errorf("strict: task state %q, want no task", n.TaskState)
				} else {
					t.Logf("strict failed %v after its run was created", n.UpdatedAt.Sub(run.CreatedAt))
				}
			}
		}
	})

	t.Run("reruns reach dependants", func(t *testing.T) {
		p := pl.on(t)
		const hourly = "0 0 * * * *"
		slot := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
		per := slot.Format(time.RFC3339)
		// src is paused: its period's run never started.
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "src", "cron": hourly, "paused": true, "home_region": home,
			"dag": map[string]any{"name": "src", "nodes": []any{node("make", 100, nil)}}}, http.StatusCreated, nil)
		dependant := func(name, timeout string) {
			n := node("use", 10, nil)
			n["depends_on_schedules"] = []any{map[string]any{"schedule": "src", "rule": "same_period", "timeout": timeout}}
			p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": name, "cron": hourly, "paused": true, "home_region": away,
				"dag": map[string]any{"name": name, "nodes": []any{n}}}, http.StatusCreated, nil)
			p.call(http.MethodPost, "/v1/schedules/"+name+"/backfill", map[string]any{"from": per, "to": per}, http.StatusCreated, nil)
		}
		dependant("strictdep", "2s")
		dependant("patient", "60s")
		ended := func(name string, n int) []apiv1.DAGStatus {
			var runs []apiv1.DAGStatus
			waitUntil(t, 30*time.Second, fmt.Sprintf("%d ended runs of %s", n, name), func() bool {
				runs = slices.DeleteFunc(p.runs(name), func(r apiv1.DAGStatus) bool { return r.State == task.DAGRunning })
				return len(runs) >= n
			})
			sort.Slice(runs, func(i, j int) bool { return runs[i].CreatedAt.Before(runs[j].CreatedAt) })
			return runs
		}
		if r := ended("strictdep", 1)[0]; r.State != task.DAGFailed || r.Nodes[0].Reason != task.ReasonUpstreamTimeout {
			t.Fatalf("strictdep's run %s: %s, node %s %s; want FAILED, UPSTREAM_TIMEOUT", r.ID, r.State, r.Nodes[0].State, r.Nodes[0].Reason)
		}
		if runs := p.runs("patient"); len(runs) != 1 || runs[0].State != task.DAGRunning || runs[0].Nodes[0].State != task.NodeWaiting {
			t.Fatalf("patient's runs %+v, want one RUNNING, its node WAITING", runs)
		}
		out, stderr, code := runAx(t, p.api, "--token", p.fed.token(p.tok), "-o", "json", "schedule", "rerun", "src", "--period", per)
		var bf apiv1.Backfill
		if code != 0 || json.Unmarshal([]byte(out), &bf) != nil {
			t.Fatalf("ax schedule rerun: exit %d: %s %s", code, out, stderr)
		}
		src := ended("src", 1)[0]
		if src.State != task.DAGSuccess || !src.Period.Start.Equal(slot) {
			t.Fatalf("src's rerun %s: %s of %v, want SUCCESS of %s", src.ID, src.State, src.Period.Start, per)
		}
		// The dependant still waiting is released by the rerun's success.
		pat := ended("patient", 1)[0]
		if pat.State != task.DAGSuccess {
			t.Fatalf("patient's run %s: %s (%+v), want SUCCESS after src's rerun", pat.ID, pat.State, pat.Nodes)
		}
		started := p.task(pat.Nodes[0].TaskID).CreatedAt
		if started.Before(*src.FinishedAt) {
			t.Errorf("patient's node started %v, before src's rerun succeeded (%v)", started, *src.FinishedAt)
		}
		// The dependant that timed out, rerun, sees the rerun's success.
		p.call(http.MethodPost, "/v1/schedules/strictdep/rerun", map[string]any{"period": per}, http.StatusCreated, nil)
		if r := ended("strictdep", 2)[1]; r.State != task.DAGSuccess {
			t.Errorf("strictdep's rerun %s: %s, node %s %s; want SUCCESS", r.ID, r.State, r.Nodes[0].State, r.Nodes[0].Reason)
		}
		t.Logf("patient's node created %v after src's rerun of its period succeeded", started.Sub(*src.FinishedAt))
		for _, n := range []string{"strictdep", "patient", "src"} {
			p.call(http.MethodDelete, "/v1/schedules/"+n, nil, http.StatusOK, nil)
		}
	})

	t.Run("downstream rerun waits for the upstream's rerun", func(t *testing.T) {
		p := pl.on(t)
		const hourly = "0 0 * * * *"
		slot := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
		per := slot.Format(time.RFC3339)
		// srcd's task runs in the other region, long enough for a
		// dependant started against its old success to show.
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "srcd", "cron": hourly, "paused": true, "home_region": home,
			"dag": map[string]any{"name": "srcd", "nodes": []any{node("make", 1500, nil, away)}}}, http.StatusCreated, nil)
		use := node("use", 10, nil)
		use["depends_on_schedules"] = []any{map[string]any{"schedule": "srcd", "rule": "same_period", "timeout": "60s"}}
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "dstd", "cron": hourly, "paused": true, "home_region": home,
			"dag": map[string]any{"name": "dstd", "nodes": []any{use}}}, http.StatusCreated, nil)
		// The period's first runs, both successful: the old success.
		for _, n := range []string{"srcd", "dstd"} {
			p.call(http.MethodPost, "/v1/schedules/"+n+"/backfill", map[string]any{"from": per, "to": per}, http.StatusCreated, nil)
		}
		succeeded := func(name string, n int) []apiv1.DAGStatus {
			var runs, all []apiv1.DAGStatus
			defer func() {
				if t.Failed() {
					for _, r := range all {
						t.Logf("%s run %s: %s, period %v, created %v", name, r.ID, r.State, r.Period, r.CreatedAt)
					}
				}
			}()
			waitUntil(t, 60*time.Second, fmt.Sprintf("%d ended runs of %s", n, name), func() bool {
				all = p.runs(name)
				runs = slices.DeleteFunc(slices.Clone(all), func(r apiv1.DAGStatus) bool { return r.State == task.DAGRunning })
				return len(runs) >= n
			})
			sort.Slice(runs, func(i, j int) bool { return runs[i].CreatedAt.Before(runs[j].CreatedAt) })
			for _, r := range runs {
				if r.State != task.DAGSuccess {
					t.Fatalf("%s's run %s: %s (%+v), want SUCCESS", name, r.ID, r.State, r.Nodes)
				}
			}
			return runs
		}
		first := succeeded("dstd", 1)[0]
		// A plain rerun of srcd's period first: a later success of the
		// period than its first run, which the downstream rerun must not
		// take either.
		p.call(http.MethodPost, "/v1/schedules/srcd/rerun", map[string]any{"period": per}, http.StatusCreated, nil)
		succeeded("srcd", 2)
		out, stderr, code := runAx(t, p.api, "--token", p.fed.token(p.tok), "-o", "json", "schedule", "rerun", "srcd", "--period", per, "--downstream")
		var root apiv1.Backfill
		if code != 0 || json.Unmarshal([]byte(out), &root) != nil || len(root.Downstream) != 1 || root.Downstream[0].Schedule != "dstd" {
			t.Fatalf("ax schedule rerun --downstream: exit %d: %s %s, want a rerun of srcd naming dstd's", code, out, stderr)
		}
		src := succeeded("srcd", 3)[2]
		rerun := succeeded("dstd", 2)[1]
		var srcRerun apiv1.Backfill
		waitUntil(t, 30*time.Second, "srcd's rerun recorded its run", func() bool {
			srcRerun = p.backfill("srcd", root.ID)
			return len(srcRerun.Runs) == 1
		})
		if src.ID != srcRerun.Runs[0].ID || src.Nodes[0].Region != away {
			t.Fatalf("srcd's second run %s in %s, want its rerun's %s in %s", src.ID, src.Nodes[0].Region, srcRerun.Runs[0].ID, away)
		}
		started := p.task(rerun.Nodes[0].TaskID).CreatedAt
		if started.Before(*src.FinishedAt) {
			t.Errorf("dstd's rerun node started %v, before srcd's rerun succeeded (%v)", started, *src.FinishedAt)
		}
		g := rerun.Nodes[0].Gates
		if rerun.ID == first.ID || !rerun.Period.Start.Equal(slot) || len(g) != 1 || g[0].RunID != src.ID || !g[0].Exact {
			t.Fatalf("dstd's rerun %s of %v gates %+v, want one exact gate on srcd's rerun %s", rerun.ID, rerun.Period.Start, g, src.ID)
		}
		// The CLI shows what the downstream rerun waits for.
		text, stderr, code := runAx(t, p.api, "--token", p.fed.token(p.tok), "schedule", "backfills", "dstd")
		if code != 0 || !strings.Contains(text, "waits for srcd's rerun "+root.ID+": run "+src.ID) || !strings.Contains(text, "waits for "+src.ID) {
			t.Errorf("ax schedule backfills dstd: exit %d: %s %s, want the rerun waiting for %s", code, text, stderr, src.ID)
		}
		t.Logf("dstd's rerun node created %v after srcd's rerun (in %s) succeeded; %s", started.Sub(*src.FinishedAt), away, text)
		for _, n := range []string{"dstd", "srcd"} {
			p.call(http.MethodDelete, "/v1/schedules/"+n, nil, http.StatusOK, nil)
		}
	})

	t.Run("single-task upstream records its end", func(t *testing.T) {
		p := pl.on(t)
		const hourly = "0 0 * * * *"
		per := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour).Format(time.RFC3339)
		// upone's task is pinned to the other region: it is handed off, and
		// the region that ends it records the end.
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "upone", "cron": hourly, "paused": true, "home_region": home,
			"task": map[string]any{"type": "sleep", "tags": map[string]string{"class": "cpu"}, "regions": []string{away},
				"payload": map[string]any{"ms": 50}}}, http.StatusCreated, nil)
		n := node("use", 10, nil)
		n["depends_on_schedules"] = []any{map[string]any{"schedule": "upone", "rule": "same_period", "timeout": "60s"}}
		p.call(http.MethodPost, "/v1/schedules", map[string]any{"name": "downone", "cron": hourly, "paused": true, "home_region": home,
			"dag": map[string]any{"name": "downone", "nodes": []any{n}}}, http.StatusCreated, nil)
		p.call(http.MethodPost, "/v1/schedules/downone/backfill", map[string]any{"from": per, "to": per}, http.StatusCreated, nil)
		waitUntil(t, 30*time.Second, "downone's run waiting for upone", func() bool {
			runs := p.runs("downone")
			return len(runs) == 1 && runs[0].Nodes[0].State == task.NodeWaiting
		})
		var bf apiv1.Backfill
		p.call(http.MethodPost, "/v1/schedules/upone/backfill", map[string]any{"from": per, "to": per}, http.StatusCreated, &bf)
		var down apiv1.DAGStatus
		waitUntil(t, 60*time.Second, "downone's run ended", func() bool {
			runs := p.runs("downone")
			if len(runs) != 1 {
				return false
			}
			down = runs[0]
			return down.State != task.DAGRunning
		})
		if down.State != task.DAGSuccess {
			t.Fatalf("downone's run %s: %s (%+v), want SUCCESS after upone's task", down.ID, down.State, down.Nodes)
		}
		var up apiv1.Backfill
		waitUntil(t, 30*time.Second, "upone's backfill done", func() bool {
			up = p.backfill("upone", bf.ID)
			return up.State == apiv1.BackfillDone
		})
		if len(up.Runs) != 1 {
			t.Fatalf("upone's backfill started %+v, want one run", up.Runs)
		}
		id := up.Runs[0].ID
		if tk := p.task(id); tk.State != task.Success || tk.HeldBy != away {
			t.Fatalf("upone's task %s: %s held by %s, want SUCCESS in %s", id, tk.State, tk.HeldBy, away)
		}
		// The end woke the gates through the global etcd, as a DAG run's.
		var rec struct {
			RunID  string        `json:"run_id"`
			Period time.Time     `json:"period_start"`
			State  task.DAGState `json:"state"`
		}
		etcd := p.fed.global.Client()
		waitUntil(t, 10*time.Second, "upone's task end recorded in the global etcd", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := etcd.Get(ctx, "/ax/schedule-ends/team-a/upone")
			return err == nil && len(resp.Kvs) == 1 && json.Unmarshal(resp.Kvs[0].Value, &rec) == nil && rec.RunID == id
		})
		if rec.State != task.DAGSuccess || rec.Period.Format(time.RFC3339) != per {
			t.Errorf("upone's end recorded as %+v, want %s SUCCESS of %s", rec, id, per)
		}
		for _, n := range []string{"downone", "upone"} {
			p.call(http.MethodDelete, "/v1/schedules/"+n, nil, http.StatusOK, nil)
		}
	})

	// The backfilled schedule: paused (only backfills run it), a minute
	// apart, a two-node DAG whose first node runs in the other region.
	bfDAG := func(name string, ms int) map[string]any {
		return map[string]any{"name": name, "cron": "0 * * * * *", "paused": true, "home_region": home,
			"dag": map[string]any{"name": name, "nodes": []any{node("load", ms, nil, away), node("check", ms/2, []string{"load"})}}}
	}
	from := time.Now().UTC().Truncate(time.Minute).Add(-3 * time.Hour)
	checkBackfill := func(t *testing.T, p *pipelines, name string, bf apiv1.Backfill, n int) {
		t.Helper()
		runs := p.runs(name)
		if bf.State != apiv1.BackfillDone || len(bf.Runs) != n || len(runs) != n {
			t.Fatalf("backfill %s: %s, %d periods started, %d runs; want DONE, %d", bf.ID, bf.State, len(bf.Runs), len(runs), n)
		}
		byCreation := slices.Clone(runs)
		sort.Slice(byCreation, func(i, j int) bool { return byCreation[i].CreatedAt.Before(byCreation[j].CreatedAt) })
		for i, r := range runs {
			if want := bf.Runs[0].Period.Start.Add(time.Duration(i) * time.Minute); !r.Period.Start.Equal(want) || r.State != task.DAGSuccess {
				t.Errorf("run %d %s: period %v %s, want %v SUCCESS", i, r.ID, r.Period.Start, r.State, want)
			}
			if byCreation[i].ID != r.ID {
				t.Errorf("run %d created is of period %v, want %v: not in period order", i, byCreation[i].Period.Start, r.Period.Start)
			}
		}
		if m := maxOverlap(runs); m > 3 {
			t.Errorf("%d runs active at once, want at most 3", m)
		} else {
			t.Logf("backfill %s: %d periods, at most %d runs at once, %v from creation to end", bf.ID, n, m, bf.FinishedAt.Sub(bf.CreatedAt))
		}
	}

	t.Run("backfill 20 periods max-active 3", func(t *testing.T) {
		p := pl.on(t)
		p.call(http.MethodPost, "/v1/schedules", bfDAG("nightly", 400), http.StatusCreated, nil)
		out, stderr, code := runAx(t, p.api, "--token", p.fed.token(p.tok), "-o", "json", "schedule", "backfill", "nightly",
			"--from", from.Format(time.RFC3339), "--to", from.Add(19*time.Minute).Format(time.RFC3339), "--max-active", "3", "--wait")
		var bf apiv1.Backfill
		if code != 0 || json.Unmarshal([]byte(out), &bf) != nil {
			t.Fatalf("ax schedule backfill: exit %d: %s %s", code, out, stderr)
		}
		checkBackfill(t, p, "nightly", bf, 20)
		// The grid shows the backfilled periods and the slots since the
		// schedule was created, not the hours of slots before it existed.
		var st apiv1.ScheduleStatus
		p.call(http.MethodGet, "/v1/schedules/nightly", nil, http.StatusOK, &st)
		var g apiv1.ScheduleGrid
		p.call(http.MethodGet, "/v1/schedules/nightly/grid?periods=50", nil, http.StatusOK, &g)
		backfilled := 0
		for _, gp := range g.Periods {
			switch {
			case gp.RunID != "" && gp.State == string(task.DAGSuccess):
				backfilled++
			case !gp.Period.Start.After(st.CreatedAt):
				t.Errorf("grid period %v without a run, before the schedule was created (%v)", gp.Period.Start, st.CreatedAt)
			}
		}
		if backfilled != 20 || len(g.Periods) > 20+int(time.Since(st.CreatedAt)/time.Minute)+1 {
			t.Errorf("grid: %d periods, %d of them backfilled; want the 20 backfilled and the slots since %v", len(g.Periods), backfilled, st.CreatedAt)
		}
	})

	t.Run("backfill cancel", func(t *testing.T) {
		p := pl.on(t)
		p.call(http.MethodPost, "/v1/schedules", bfDAG("slow", 3000), http.StatusCreated, nil)
		var bf apiv1.Backfill
		p.call(http.MethodPost, "/v1/schedules/slow/backfill", map[string]any{"from": from.Format(time.RFC3339),
			"to": from.Add(9 * time.Minute).Format(time.RFC3339), "max_active": 1}, http.StatusCreated, &bf)
		waitUntil(t, 20*time.Second, "the first period started", func() bool { return len(p.backfill("slow", bf.ID).Runs) > 0 })
		out, stderr, code := runAx(t, p.api, "--token", p.fed.token(p.tok), "-o", "json", "schedule", "cancel-backfill", "slow", bf.ID)
		var got apiv1.Backfill
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.State != apiv1.BackfillCanceled || got.CanceledBy != tokOperatorA {
			t.Fatalf("ax schedule cancel-backfill: exit %d: %s %s", code, out, stderr)
		}
		started := len(got.Runs)
		waitUntil(t, 20*time.Second, "the started run ended", func() bool {
			for _, r := range p.runs("slow") {
				if r.State == task.DAGRunning {
					return false
				}
			}
			return true
		})
		time.Sleep(time.Second) // a leader pass or two
		runs := p.runs("slow")
		if len(runs) != started || p.backfill("slow", bf.ID).State != apiv1.BackfillCanceled {
			t.Errorf("after the cancel: %d runs, want the %d started before it", len(runs), started)
		}
		for _, r := range runs {
			if r.State != task.DAGCanceled {
				t.Errorf("run %s of the cancelled backfill: %s, want CANCELED", r.ID, r.State)
			}
		}
	})

	t.Run("federation leader killed mid-backfill", func(t *testing.T) {
		p := pl.on(t)
		p.call(http.MethodPost, "/v1/schedules", bfDAG("failover", 800), http.StatusCreated, nil)
		var bf apiv1.Backfill
		p.call(http.MethodPost, "/v1/schedules/failover/backfill", map[string]any{"from": from.Format(time.RFC3339),
			"to": from.Add(19 * time.Minute).Format(time.RFC3339), "max_active": 3}, http.StatusCreated, &bf)
		waitUntil(t, 30*time.Second, "5 periods started", func() bool { return len(p.backfill("failover", bf.ID).Runs) >= 5 })
		var leader *proc
		for _, r := range fed.order {
			for _, s := range fed.region(r).servers {
				if metric(t, s.api, "ax_federation_leader") == 1 {
					leader = s
				}
			}
		}
		if leader == nil {
			t.Fatal("no server leads the federation")
		}
		leader.kill()
		for _, r := range fed.order {
			for _, s := range fed.region(r).servers {
				if s != leader {
					p.api = s.api
				}
			}
		}
		t.Logf("federation leader %s SIGKILLed with %d periods started", leader.name, len(p.backfill("failover", bf.ID).Runs))
		waitUntil(t, 90*time.Second, "the backfill done", func() bool { return p.backfill("failover", bf.ID).State == apiv1.BackfillDone })
		bf = p.backfill("failover", bf.ID)
		seen := map[time.Time]bool{}
		for _, r := range bf.Runs {
			if seen[r.Period.Start] {
				t.Errorf("period %v started twice", r.Period.Start)
			}
			seen[r.Period.Start] = true
		}
		checkBackfill(t, p, "failover", bf, 20)
	})
}

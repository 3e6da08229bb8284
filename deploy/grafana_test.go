package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ax-sched/ax/internal/promcheck"
)

// Every dashboard in deploy/grafana (what compose provisions) is a Grafana
// dashboard whose every panel query Prometheus's parser accepts (promtool;
// internal/e2e checks that the metrics they name are exported by real
// servers and workers), on the datasource compose provisions, and together
// they show what the design's operators ask for.
func TestGrafanaDashboards(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "grafana", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in deploy/grafana (%v)", err)
	}
	names := map[string]bool{}
	uids := map[string]string{}
	for _, f := range files {
		exprs, err := promcheck.Dashboard(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := promcheck.Check(t.TempDir(), exprs); err != nil {
			t.Fatal(err)
		}
		for _, e := range exprs {
			for _, n := range promcheck.Names(e.Expr) {
				names[n] = true
			}
		}
		checkPanels(t, f, uids)
	}
	for _, n := range []string{
		"ax_tasks_finished_total", "ax_tasks_submitted_total", // throughput
		"ax_task_schedule_latency_seconds_bucket", "ax_task_wait_seconds_bucket", "ax_tasks_starving",
		"ax_pool_utilisation", "ax_pool_queue_fill", "ax_pool_pressure",
		"ax_tasks_rejected_total", "ax_dlq_tasks", "ax_leader_changes_total", "ax_redis_healthy",
		"ax_cost_dollars_total", "ax_savings_dollars_total",
	} {
		if !names[n] {
			t.Errorf("no dashboard panel reads %s", n)
		}
	}
}

// checkPanels: unique dashboard uid and panel ids, a grid position for
// every panel, and every query on the dashboard's datasource variable or
// compose's Prometheus (uid prometheus).
func checkPanels(t *testing.T, path string, uids map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type ds struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	type panel struct {
		ID         int             `json:"id"`
		Title      string          `json:"title"`
		GridPos    *map[string]int `json:"gridPos"`
		Datasource *ds             `json:"datasource"`
		Targets    []struct {
			Datasource *ds `json:"datasource"`
		} `json:"targets"`
	}
	var d struct {
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if other, dup := uids[d.UID]; dup {
		t.Errorf("%s and %s share the uid %q", other, path, d.UID)
	}
	uids[d.UID] = path
	okDS := func(s *ds) bool {
		return s != nil && s.Type == "prometheus" && (s.UID == "${datasource}" || s.UID == "prometheus")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("%s: panel id %d used twice", path, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil {
			t.Errorf("%s: panel %d %q has no gridPos", path, p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			if !okDS(tg.Datasource) && !okDS(p.Datasource) {
				t.Errorf("%s: panel %d %q queries %+v, want the ${datasource} variable or uid prometheus", path, p.ID, p.Title, tg.Datasource)
			}
		}
	}
}

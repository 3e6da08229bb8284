package promcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNamesSkipsQuotedTextAndKeepsHistogramSeries(t *testing.T) {
	got := Names(`histogram_quantile(0.99, sum by (le) (rate(ax_task_schedule_latency_seconds_bucket{region=~"ax_not_a_metric"}[5m]))) / ax_pool_slots + on() ax_pool_slots`)
	want := []string{"ax_pool_slots", "ax_task_schedule_latency_seconds_bucket"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("Names (-want +got):\n%s", d)
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute(`rate(x{region=~"$region", pool=~"${pool}"}[$__rate_interval]) + increase(y[$__range])`)
	if want := `rate(x{region=~".*", pool=~".*"}[5m]) + increase(y[5m])`; got != want {
		t.Fatalf("Substitute = %s, want %s", got, want)
	}
}

// promtool parses what is valid and names the expression it refuses.
func TestCheckNamesTheBadExpression(t *testing.T) {
	good := []Expr{{"a", `sum by (region) (rate(ax_tasks_finished_total{region=~"$region"}[$__rate_interval]))`}}
	if err := Check(t.TempDir(), good); err != nil {
		t.Fatal(err)
	}
	bad := append(good, Expr{"panel 9 \"Broken\" B", `sum(rate(ax_x[5m])`})
	err := Check(t.TempDir(), bad)
	if err == nil || !strings.Contains(err.Error(), `panel 9 "Broken" B`) {
		t.Fatalf("Check of an unclosed parenthesis: %v", err)
	}
}

func TestDashboardReadsPanelsRowsAndVariables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.json")
	doc := `{"uid": "u", "title": "T", "panels": [
	  {"id": 1, "type": "row", "title": "r", "panels": [
	    {"id": 2, "type": "timeseries", "title": "inner", "targets": [{"refId": "A", "expr": "ax_a"}]}]},
	  {"id": 3, "type": "stat", "title": "s", "targets": [{"refId": "A", "expr": "ax_b"}, {"refId": "B", "expr": "ax_c"}]}],
	 "templating": {"list": [{"name": "region", "type": "query", "query": {"query": "label_values(ax_region_leader, region)"}},
	   {"name": "datasource", "type": "datasource", "query": "prometheus"}]}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Dashboard(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Expr{
		{`d.json: panel 2 "inner" A`, "ax_a"}, {`d.json: panel 3 "s" A`, "ax_b"}, {`d.json: panel 3 "s" B`, "ax_c"},
		{"d.json: variable region", "ax_region_leader"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("Dashboard (-want +got):\n%s", d)
	}
	if err := os.WriteFile(path, []byte(`{"uid": "u", "title": "T", "panels": [{"id": 1, "type": "stat", "title": "empty", "targets": [{"refId": "A"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Dashboard(path); err == nil || !strings.Contains(err.Error(), `panel 1 "empty" target A has no expression`) {
		t.Fatalf("a target without expression: %v", err)
	}
}

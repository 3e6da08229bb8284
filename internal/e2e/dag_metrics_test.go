package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A DAG run through real `ax server`s (two regions, auth on): extract runs
// in us-east-1, its home, and load is handed off to eu-west-1; the run ends
// SUCCESS and the home server's /metrics counts it: one run accepted, one
// succeeded, two nodes released (the DAG counters are registered whatever
// gatherer the API is given).
func TestDAGMetricsOnARealServer(t *testing.T) {
	t.Parallel()
	fed := newFederation(t, fedOpts{})
	node := func(id, region string, deps ...string) map[string]any {
		return map[string]any{"id": id, "depends_on": deps, "task": map[string]any{
			"type": "sleep", "payload": map[string]int{"ms": 10}, "tags": map[string]string{"class": "cpu"},
			"regions": []string{region}}}
	}
	code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/dags", map[string]any{
		"name": "metrics", "nodes": []any{node("extract", "us-east-1"), node("load", "eu-west-1", "extract")}})
	var run struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Nodes []struct {
			ID, State, Region string
		} `json:"nodes"`
	}
	if code != http.StatusCreated || json.Unmarshal(body, &run) != nil {
		t.Fatalf("POST /v1/dags: %d %s", code, body)
	}
	waitUntil(t, 30*time.Second, "DAG "+run.ID+" ends", func() bool {
		code, body := fed.call("us-east-1", tokSubmitterA, http.MethodGet, "/v1/dags/"+run.ID, nil)
		return code == http.StatusOK && json.Unmarshal(body, &run) == nil && run.State != "RUNNING"
	})
	if run.State != "SUCCESS" {
		t.Fatalf("run ended %s: %+v", run.State, run.Nodes)
	}
	for _, nd := range run.Nodes {
		if nd.ID == "load" && nd.Region != "eu-west-1" {
			t.Fatalf("load ran in %q, want eu-west-1 (handed off)", nd.Region)
		}
	}
	want := []string{
		`ax_dag_runs_total{region="us-east-1",state="RUNNING"} 1`,
		`ax_dag_runs_total{region="us-east-1",state="SUCCESS"} 1`,
		`ax_dag_nodes_released_total{region="us-east-1"} 2`,
	}
	// Counted as the reconciler records the run's end, before GET shows it.
	var metrics string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := fed.call("us-east-1", "", http.MethodGet, "/metrics", nil)
		metrics = string(body)
		missing := ""
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				missing = w
			}
		}
		if code == http.StatusOK && missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics (%d) lacks %s; its DAG lines: %s", code, missing, grepLines(metrics, "ax_dag_"))
		}
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(out)
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/promcheck"
	"github.com/ax-sched/ax/task"
)

// endpoint is one /metrics a test scraped.
type endpoint struct {
	name, region, url string
	body              string
}

// scrape reads url (a /metrics), failing the test on an error.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// sample is one line of the text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// samples parses an exposition (text format, as client_golang writes it).
func samples(body string) []sample {
	var out []sample
	for _, l := range strings.Split(body, "\n") {
		m := sampleLine.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(l, "#") {
			continue
		}
		s := sample{name: m[1], labels: map[string]string{}}
		for _, p := range labelPair.FindAllStringSubmatch(m[3], -1) {
			s.labels[p[1]] = p[2]
		}
		s.value, _ = strconv.ParseFloat(m[4], 64)
		out = append(out, s)
	}
	return out
}

// sum adds the samples of name whose labels include want.
func sum(body, name string, want map[string]string) (total float64, found bool) {
	for _, s := range samples(body) {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && s.labels[k] == v
		}
		if ok {
			total, found = total+s.value, true
		}
	}
	return total, found
}

// foreignRegions lists the series of body whose region label is not own.
func foreignRegions(body, own string) []string {
	var bad []string
	for _, s := range samples(body) {
		if r, ok := s.labels["region"]; ok && r != own {
			bad = append(bad, s.name+"{region="+r+"}")
		}
	}
	return bad
}

// promtoolCheckMetrics runs `promtool check metrics` on body.
func promtoolCheckMetrics(t *testing.T, body string) {
	t.Helper()
	cmd := exec.Command(promtool(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// promtool is the path of promtool; a test that needs it fails without it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := promcheck.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var metricsListen = regexp.MustCompile(`msg="metrics listening" addr=(127\.0\.0\.1:\d+)`)

// metricsFederation is two regions with auth on, one `ax worker --metrics`
// each, after a workload that leaves a trace in every design metric: local
// and handed-off successes, a timeout retried and then dead.
type metricsFederation struct {
	*federation
	endpoints []endpoint // every server's and worker's /metrics, scraped at the end
}

func newMetricsFederation(t *testing.T) *metricsFederation {
	t.Helper()
	promtool(t)
	// us-east-1's cpu pool is spot, half the price of an on-demand pool
	// with the same tags: its tasks save money (ax_savings_dollars_total).
	// team-b's budget, far from its edge, exports
	// ax_tenant_budget_used_ratio, which the budget alerts read.
	fed := newFederation(t, fedOpts{noWorkers: true, pools: map[string]string{"us-east-1": `
- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04, spot: true}
- {name: reserve, tags: {class: cpu}, slots: 4, price_per_slot_hour: 0.08}`},
		extra: "tenants:\n  team-b: {monthly_budget_usd: 1000, over_budget: cap, price_cap: 1}\n"})
	fed.startWorker("us-east-1", "reserve")
	workers := map[string]string{}
	for _, r := range fed.order {
		p := fed.startWorker(r, "cpu", "--metrics", "127.0.0.1:0")
		waitUntil(t, 20*time.Second, p.name+" to serve metrics", func() bool {
			if m := metricsListen.FindStringSubmatch(p.log.String()); m != nil {
				workers[r] = "http://" + m[1] + "/metrics"
				return true
			}
			return false
		})
	}
	fed.waitPlaceable()
	here := map[string]any{"type": "sleep", "payload": map[string]int{"ms": 20}, "tags": map[string]string{"class": "cpu"},
		"regions": []string{"us-east-1"}}
	var ids []string
	for i := 0; i < 5; i++ {
		id, _ := fed.submit("us-east-1", tokSubmitterA, here)
		ids = append(ids, id)
	}
	h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{"type": "noop"})
	slow, _ := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "sleep", "payload": map[string]int{"ms": 10000},
		"timeout": "200ms", "max_retries": 1, "retry_base": "10ms", "retry_cap": "10ms",
		"tags": map[string]string{"class": "cpu"}, "regions": []string{"us-east-1"}})
	for _, id := range ids {
		fed.waitState("us-east-1", tokSubmitterA, id, task.Success, 20*time.Second)
	}
	fed.waitState("us-east-1", tokSubmitterA, h.ID, task.Success, 20*time.Second)
	fed.waitState("us-east-1", tokSubmitterA, slow, task.Failed, 20*time.Second)
	m := &metricsFederation{federation: fed}
	// The leader's figures come every second; counters as outcomes are recorded.
	waitUntil(t, 10*time.Second, "us-east-1's leader to count the dead letter", func() bool {
		v, _ := sum(scrape(t, fed.server("us-east-1").api+"/metrics"), "ax_dlq_tasks", nil)
		return v == 1
	})
	waitUntil(t, 10*time.Second, "the workers to count every outcome", func() bool {
		v, _ := sum(scrape(t, workers["us-east-1"]), "ax_tasks_finished_total", map[string]string{"state": "FAILED"})
		w, _ := sum(scrape(t, workers["eu-west-1"]), "ax_tasks_finished_total", map[string]string{"state": "SUCCESS"})
		return v == 1 && w == 1
	})
	for _, r := range fed.order {
		m.endpoints = append(m.endpoints,
			endpoint{name: r + " server", region: r, url: fed.server(r).api + "/metrics"},
			endpoint{name: r + " worker", region: r, url: workers[r]})
	}
	for i := range m.endpoints {
		m.endpoints[i].body = scrape(t, m.endpoints[i].url)
	}
	return m
}

// exported is every metric name the endpoints export, histogram and summary
// series under their family's name too.
func (m *metricsFederation) exported() map[string]bool {
	out := map[string]bool{}
	for _, e := range m.endpoints {
		for _, s := range samples(e.body) {
			out[s.name] = true
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(s.name, suf); ok {
					out[base] = true
				}
			}
		}
	}
	return out
}

// Real `ax server`s and `ax worker --metrics` (two regions, auth on, a
// handed-off task): every /metrics passes `promtool check metrics`, names
// only its own region, and carries the design's metrics with the workload's
// figures.
func TestMetricsOfRealServersAndWorkers(t *testing.T) {
	t.Parallel()
	m := newMetricsFederation(t)
	t.Run("ax cost: spend where it ran, federation-wide, per tenant", func(t *testing.T) {
		var rep struct {
			Rows []struct {
				Tenant, Pool, Region string
				Runs                 int64   `json:"runs"`
				Failed               int64   `json:"failed_runs"`
				Spend                float64 `json:"spend_usd"`
				Savings              float64 `json:"savings_usd"`
				SpotRuns             int64   `json:"spot_runs"`
			} `json:"rows"`
			Unavailable []string `json:"unavailable"`
		}
		api := m.server("us-east-1").api
		out, errOut, code := runAx(t, api, "--token", m.token(tokOperator), "cost", "--group-by", "tenant,pool,region", "-o", "json")
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Unavailable) != 0 {
			t.Fatalf("ax cost: exit %d %s\n%s", code, errOut, out)
		}
		got := map[string]int64{}
		for _, r := range rep.Rows {
			got[r.Tenant+" "+r.Region+" "+r.Pool] += r.Runs
			// us-east-1's cpu is spot, at the price of eu-west-1's on-demand
			// cpu pool (the cheapest on-demand pool with class=cpu in any
			// region): savings 0, not the reserve pool's half.
			if r.Region == "us-east-1" && r.Pool == "cpu" && (r.Spend <= 0 || r.Savings < -1e-9 || r.Savings > 1e-9 || r.SpotRuns != r.Runs || r.Failed < 2) {
				t.Errorf("us-east-1/cpu: %+v", r)
			}
		}
		// 5 sleeps and the slow task's 2 attempts in us-east-1; the
		// handed-off noop in eu-west-1, counted there.
		if got["team-a us-east-1 cpu"] != 7 || got["team-a eu-west-1 cpu"] != 1 {
			t.Fatalf("runs by tenant, region, pool: %v\n%s", got, out)
		}
		out, _, code = runAx(t, api, "--token", m.token(tokSubmitterB), "cost", "--group-by", "tenant", "-o", "json")
		if code != 0 || strings.Contains(out, "team-a") {
			t.Fatalf("team-b's token: exit %d\n%s", code, out)
		}
	})
	t.Run("successes kept by the leader's sweep, not a TTL each", func(t *testing.T) {
		// the real leader swept at the start of its term (rsw alive), so the
		// successes of us-east-1 are in its minute lists, without a TTL
		ctx, rdb, p := context.Background(), m.region("us-east-1").rdb, "ax:{us-east-1:0}:"
		if d := rdb.PTTL(ctx, p+"rsw").Val(); d <= 0 || d > 5*time.Minute {
			t.Fatalf("rsw TTL %v, want (0, 5m]: no sweeper alive", d)
		}
		n := 0
		for _, k := range rdb.Keys(ctx, p+"rs:*").Val() {
			for _, id := range rdb.LRange(ctx, k, 0, -1).Val() {
				if d := rdb.PTTL(ctx, p+"t:"+id).Val(); d != -1 {
					t.Errorf("%s: TTL %v, want none", id, d)
				}
				n++
			}
		}
		if n < 5 {
			t.Fatalf("%d successes in the minute lists, want at least the 5 sleeps", n)
		}
		for _, e := range m.endpoints[:1] {
			if v, ok := sum(e.body, "ax_success_sweep_lag_seconds", nil); !ok || v != 0 {
				t.Fatalf("%s: ax_success_sweep_lag_seconds %v (exported %v), want 0", e.name, v, ok)
			}
		}
	})
	for _, e := range m.endpoints {
		t.Run("promtool check metrics: "+e.name, func(t *testing.T) { promtoolCheckMetrics(t, e.body) })
		if bad := foreignRegions(e.body, e.region); len(bad) > 0 {
			t.Errorf("%s exports series of other regions: %v", e.name, bad)
		}
	}
	server, worker := m.endpoints[0].body, m.endpoints[1].body
	euWorker := m.endpoints[3].body
	us := map[string]string{"region": "us-east-1"}
	with := func(kv ...string) map[string]string {
		out := map[string]string{"region": "us-east-1"}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, c := range []struct {
		what, body, name string
		labels           map[string]string
		want             float64 // -1: present, any value
	}{
		// Ready→start: 5 local tasks, the slow one twice (a retry).
		{"schedule latency", worker, "ax_task_schedule_latency_seconds_count", with("pool", "cpu", "priority", "2"), 7},
		{"wait (first attempts)", worker, "ax_task_wait_seconds_count", with("pool", "cpu", "priority", "2"), 6},
		{"handed-off task's wait, at the receiver", euWorker, "ax_task_wait_seconds_count", map[string]string{"region": "eu-west-1"}, 1},
		{"retries", worker, "ax_task_retries_total", us, 1},
		{"timeouts", worker, "ax_task_timeouts_total", us, 2},
		{"in flight", worker, "ax_worker_tasks_inflight", us, 0},
		{"finished", worker, "ax_tasks_finished_total", with("state", "SUCCESS"), 5},
		{"cost", worker, "ax_cost_dollars_total", with("tenant", "team-a", "type", "sleep"), -1},
		{"savings", worker, "ax_savings_dollars_total", with("tenant", "team-a", "type", "sleep"), -1},
		{"starving", server, "ax_tasks_starving", with("pool", "cpu", "priority", "2"), 0},
		{"DLQ", server, "ax_dlq_tasks", us, 1},
		{"pending", server, "ax_tasks_pending", us, 0},
		// At submit: 5 + the slow one; its retry is placed again by the leader.
		{"placed here", server, "ax_placement_decisions_total", with("outcome", "placed", "target", "us-east-1"), 7},
		{"placed in eu-west-1", server, "ax_placement_decisions_total", with("outcome", "placed", "target", "eu-west-1"), 1},
		{"refusals", server, "ax_tasks_rejected_total", with("reason", "saturated"), 0},
		{"submitted", server, "ax_tasks_submitted_total", with("tenant", "team-a"), 7},
		{"leader changes", server, "ax_leader_changes_total", us, 1},
		{"fenced writes", server, "ax_fenced_writes_rejected_total", us, 0},
		{"global etcd", server, "ax_global_etcd_healthy", us, 1},
		{"provider", server, "ax_region_info", with("provider", "aws"), 1},
		{"redis", server, "ax_redis_healthy", us, 1},
		{"view", server, "ax_global_view_connected", us, 1},
		{"API requests", server, "ax_http_requests_total", us, -1},
		{"hand-offs", server, "ax_handoffs_total", with("target", "eu-west-1", "outcome", "accepted"), 1},
	} {
		got, ok := sum(c.body, c.name, c.labels)
		if !ok || (c.want >= 0 && got != c.want) {
			t.Errorf("%s: %s%v = %v (present %v), want %v", c.what, c.name, c.labels, got, ok, c.want)
		}
	}
	t.Run("every metric of the dashboards and alert rules is exported", func(t *testing.T) {
		exported := m.exported()
		dashboards, _ := filepath.Glob(filepath.Join("..", "..", "deploy", "grafana", "*.json"))
		if len(dashboards) == 0 {
			t.Fatal("no dashboards in deploy/grafana")
		}
		var exprs []promcheck.Expr
		for _, f := range dashboards {
			es, err := promcheck.Dashboard(f)
			if err != nil {
				t.Fatal(err)
			}
			exprs = append(exprs, es...)
		}
		es, err := promcheck.Rules(filepath.Join("..", "..", "deploy", "prometheus", "ax-rules.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		exprs = append(exprs, es...)
		for _, e := range exprs {
			for _, n := range promcheck.Names(e.Expr) {
				if !exported[n] {
					t.Errorf("%s reads %s, which no server or worker exports", e.Where, n)
				}
			}
		}
	})
	t.Run("every metric docs/metrics.md documents is exported", func(t *testing.T) {
		doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
		if err != nil {
			t.Fatal(err)
		}
		exported := m.exported()
		// Families this workload does not produce, each exported and
		// checked by the test named.
		elsewhere := map[string]string{
			"ax_dag_runs_total":           "TestDAGMetricsOnARealServer",
			"ax_dag_nodes_released_total": "TestDAGMetricsOnARealServer",
			"ax_slow_lane_slots":          "TestLimitsAcrossWorkers",
			"ax_slow_lane_running":        "TestLimitsAcrossWorkers",
			"ax_tenant_tasks_starving":    "TestLimitsAcrossWorkers",
			"ax_schedule_fires_total":     "TestSlowCheapPoolStopsWinningOnceLearnt",
			"ax_tenant_budget_used_ratio": "TestSlowCheapPoolStopsWinningOnceLearnt",
		}
		documented := map[string]bool{}
		for _, row := range regexp.MustCompile("(?m)^\\| ([^|]+) \\|").FindAllStringSubmatch(string(doc), -1) {
			for _, n := range regexp.MustCompile("`(ax_[a-z_]+)`").FindAllStringSubmatch(row[1], -1) {
				documented[n[1]] = true
			}
		}
		if len(documented) < 40 {
			t.Fatalf("%d metrics read from docs/metrics.md's tables, want ≥ 40", len(documented))
		}
		for n := range documented {
			if !exported[n] && elsewhere[n] == "" {
				t.Errorf("docs/metrics.md documents %s; no server or worker exports it", n)
			}
		}
	})
	if t.Failed() {
		names := []string{}
		for n := range m.exported() {
			if strings.HasPrefix(n, "ax_") {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		t.Logf("exported: %v", names)
	}
}

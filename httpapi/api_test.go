package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// The API contract (docs/architecture.md §7): every endpoint api.go serves and
// every documented error, against three real regions. f.call checks that
// every error body is {"error":{"code","message"[,"field"]}}.
func TestAPIContract(t *testing.T) {
	// AWS's L4 pool holds 4 with one slot: 429 comes quickly.
	f := newFed(t, fedtest.WithCapacity(aws, poolGPU, 4))
	ctx := fedtest.Ctx(t)
	tasks := f.R(aws).URL() + "/v1/tasks"
	// Local work: it stays in AWS (AWS spot is its cheapest pool).
	local := func(typ string) spec { return spec{"type": typ, "tags": x86, "regions": []string{aws}} }
	// A quiet long-poll of another region's events with a wait longer than
	// calls to peers may take (10 s) is answered 200, empty, within 5 s
	// (ax tail --region R's default 20 s wait shows R's events). It runs
	// beside the rest; checked at the end.
	type polled struct {
		rep  reply
		took time.Duration
	}
	quiet := make(chan polled, 1)
	go func() {
		future := strings.Repeat("9999999999999-0,", 15) + "9999999999999-0" // after every event of every shard
		start := time.Now()
		rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/events?region="+gcp+"&wait=15s&after="+url.QueryEscape(future), tokAdmin, nil)
		quiet <- polled{rep, time.Since(start)}
	}()

	t.Run("health, readiness, metrics, dashboard", func(t *testing.T) {
		rep := f.Call(http.MethodGet, f.R(aws).URL()+"/healthz", "", nil).Want(t, http.StatusOK)
		if strings.TrimSpace(string(rep.Body)) != "ok" {
			t.Fatalf("healthz: %q", rep.Body)
		}
		// Without a token: ready or not, nothing more; no /metrics (tenant
		// names in labels).
		var ready map[string]any
		f.Call(http.MethodGet, f.R(aws).URL()+"/readyz", "", nil).Want(t, http.StatusOK).JSON(t, &ready)
		if len(ready) != 1 || ready["ready"] != true {
			t.Fatalf("readyz without a token: %v", ready)
		}
		f.Call(http.MethodGet, f.R(aws).URL()+"/metrics", "", nil).Want(t, http.StatusUnauthorized)
		f.Call(http.MethodGet, f.R(aws).URL()+"/readyz", tokAcme, nil).Want(t, http.StatusOK).JSON(t, &ready)
		if ready["ready"] != true || ready["region"] != aws || ready["global_view"] != true {
			t.Fatalf("readyz: %v", ready)
		}
		f.SubmitOK(aws, tokAcme, local("metrics.probe"))
		// Its labels name every tenant: a token of one tenant is 403.
		if e := f.Call(http.MethodGet, f.R(aws).URL()+"/metrics", tokAcme, nil).Want(t, http.StatusForbidden).Err(t); e.Code != apiv1.CodeForbidden {
			t.Errorf("/metrics with acme's token: %+v", e)
		}
		rep = f.Call(http.MethodGet, f.R(aws).URL()+"/metrics", tokOperator, nil).Want(t, http.StatusOK)
		for _, m := range []string{"ax_tasks_submitted_total", "ax_http_requests_total", "ax_pool_",
			`ax_placement_decisions_total{outcome="placed",pool="cpu-spot",region="aws-use1",target="aws-use1"}`} {
			if !strings.Contains(string(rep.Body), m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
		if !strings.Contains(string(rep.Body), `ax_tasks_submitted_total{region="aws-use1",tenant="acme",type="metrics.probe"} 1`) {
			t.Errorf("submitted counter not counted by region, tenant, type")
		}
		rep = f.Call(http.MethodGet, f.R(aws).URL()+"/", "", nil).Want(t, http.StatusOK)
		if !strings.Contains(string(rep.Body), "/ui/app.js") || !strings.Contains(rep.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("dashboard: %s %v", rep.Body, rep.Header)
		}
		rep = f.Call(http.MethodGet, f.R(aws).URL()+"/ui/app.js", "", nil).Want(t, http.StatusOK)
		if !strings.Contains(string(rep.Body), "/v1/regions") || !strings.Contains(string(rep.Body), "sessionStorage") {
			t.Errorf("dashboard script does not poll /v1/regions with a session token")
		}
	})

	t.Run("401 without or with an unknown token", func(t *testing.T) {
		for _, ep := range []struct{ method, path string }{
			{http.MethodPost, "/v1/tasks"}, {http.MethodPost, "/v1/tasks/batch"}, {http.MethodGet, "/v1/regions"},
			{http.MethodGet, "/v1/dlq"}, {http.MethodPost, "/v1/placement/explain"}, {http.MethodPost, "/v1/tasks/cancel"},
			{http.MethodPost, "/v1/internal/handoff"}, {http.MethodGet, "/v1/tasks/0000000000000000.0.aws-use1"},
		} {
			for _, tok := range []string{"", tokUnknown} {
				rep := f.Call(ep.method, f.R(aws).URL()+ep.path, tok, spec{"type": "x"}).Want(t, http.StatusUnauthorized)
				if e := rep.Err(t); e.Code != apiv1.CodeUnauthorized || e.Field != "Authorization" || rep.Header.Get("WWW-Authenticate") == "" {
					t.Fatalf("%s %s token %q: %s %v", ep.method, ep.path, tok, rep.Body, rep.Header)
				}
			}
		}
		// "Bearer" is required; a bare token is not one.
		req, _ := http.NewRequest(http.MethodGet, f.R(aws).URL()+"/v1/regions", nil)
		req.Header.Set("Authorization", tokAdmin)
		resp, err := f.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a token without Bearer: %d", resp.StatusCode)
		}
	})

	t.Run("403 for roles, tenants and the hand-off endpoint", func(t *testing.T) {
		sr := f.SubmitOK(aws, tokAcme, local("forbidden.probe"))
		for _, path := range []string{"/cancel", "/replay", "/priority"} {
			rep := f.Call(http.MethodPost, tasks+"/"+sr.ID+path, tokAcme, spec{"priority": 1}).Want(t, http.StatusForbidden)
			if e := rep.Err(t); e.Code != apiv1.CodeForbidden || e.Field != "Authorization" {
				t.Fatalf("%s: %s", path, rep.Body)
			}
		}
		f.Call(http.MethodPost, tasks+"/cancel", tokAcme, spec{"type": "x"}).Want(t, http.StatusForbidden)
		for _, tok := range []string{tokGlobex, tokGlobexOps} { // a role below operator; a token of one tenant
			if e := f.Call(http.MethodPost, f.R(aws).URL()+"/v1/regions/"+aws+"/drain", tok, nil).Want(t, http.StatusForbidden).Err(t); e.Field != "Authorization" {
				t.Errorf("drain with %s: %+v", tok, e)
			}
		}
		// Another tenant's name in the spec.
		rep := f.Submit(aws, tokAcme, spec{"type": "x", "tenant": "globex"}).Want(t, http.StatusForbidden)
		if rep.Err(t).Field != "tenant" {
			t.Fatalf("tenant mismatch: %s", rep.Body)
		}
		// The hand-off endpoint takes only the cluster token, not even an admin's.
		body := apiv1.HandOff{ID: sr.ID, Pool: poolSpot, Spec: []byte(`{"type":"x"}`)}
		for _, tok := range []string{tokAdmin, tokOperator, tokAcme} {
			rep := f.Call(http.MethodPost, f.R(gcp).URL()+"/v1/internal/handoff", tok, body).Want(t, http.StatusForbidden)
			if e := rep.Err(t); !strings.Contains(e.Message, "cluster token") || e.Field != "Authorization" {
				t.Fatalf("hand-off with %s: %s", tok, rep.Body)
			}
		}
		// The cluster token is refused an unknown pool (a definite refusal).
		body.Pool = "no-such-pool"
		f.Call(http.MethodPost, f.R(gcp).URL()+"/v1/internal/handoff", tokCluster, body).Want(t, http.StatusUnprocessableEntity)
	})

	t.Run("400 names the field", func(t *testing.T) {
		cases := []struct {
			name, body, field string
			fixedBug          string // a bug found here and fixed in queue (kept for the record)
		}{
			{"priority out of range", `{"type":"x","priority":9}`, "priority", ""},
			{"negative priority", `{"type":"x","priority":-1}`, "priority", ""},
			{"unknown field", `{"type":"x","colour":"red"}`, "colour", ""},
			{"wrong type", `{"type":"x","priority":"high"}`, "priority", ""},
			{"wrong type of tags", `{"type":"x","tags":["gpu"]}`, "tags", ""},
			{"wrong type in a nested value", `{"type":"x","tags":{"gpu":1}}`, "tags", ""},
			{"type missing", `{"priority":1}`, "type", ""},
			{"type with spaces", `{"type":"two words"}`, "type", ""},
			{"bad tag key", `{"type":"x","tags":{"GPU":"a100"}}`, "tags.GPU", ""},
			{"bad region name", `{"type":"x","regions":["US East"]}`, "regions[0]", ""},
			{"region twice", `{"type":"x","regions":["aws-use1","aws-use1"]}`, "regions[1]", ""},
			{"region outside the federation", `{"type":"x","regions":["aws-use1","mars-1"]}`, "regions[1]", ""},
			{"run_at and delay", `{"type":"x","delay":"1m","run_at":"2099-01-01T00:00:00Z"}`, "delay", ""},
			{"negative delay", `{"type":"x","delay":"-1s"}`, "delay", ""},
			{"max_retries out of range", `{"type":"x","max_retries":1000}`, "max_retries", ""},
			{"retry_cap below retry_base", `{"type":"x","retry_base":"2s","retry_cap":"1s"}`, "retry_cap", ""},
			{"ttl without key", `{"type":"x","idempotency_ttl":"1h"}`, "idempotency_ttl", ""},
			{"bad trace id", `{"type":"x","trace_id":"xyz"}`, "trace_id", ""},
			{"bad duration", `{"type":"x","delay":"soon"}`, "delay", "queue: Duration.UnmarshalJSON errors name no field"},
			{"wrong type of a duration", `{"type":"x","timeout":true}`, "timeout", "queue: Duration.UnmarshalJSON errors name no field"},
			{"bad time", `{"type":"x","run_at":"tomorrow"}`, "run_at", "queue: time parse errors name no field"},
			{"payload not JSON-typed", `{"type":"x","payload":}`, "", ""},
			{"not JSON", `{"type":`, "", ""},
			{"empty body", ``, "", ""},
			{"trailing data", `{"type":"x"} {"type":"y"}`, "", ""},
			{"an array", `[{"type":"x"}]`, "", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rep := f.Call(http.MethodPost, tasks, tokAcme, tc.body).Want(t, http.StatusBadRequest)
				e := rep.Err(t)
				if e.Code != apiv1.CodeInvalid || e.Field != tc.field {
					t.Fatalf("code %q field %q, want %q %q: %s", e.Code, e.Field, apiv1.CodeInvalid, tc.field, rep.Body)
				}
			})
		}
	})

	t.Run("404 for another tenant's task, a malformed id, an unknown one", func(t *testing.T) {
		sr := f.SubmitOK(aws, tokAcme, local("tenant.private"))
		for _, srv := range fedtest.Regions { // the home region and forwarded
			_, rep := f.GetTask(srv, tokGlobex, sr.ID)
			rep.Want(t, http.StatusNotFound)
			f.Call(http.MethodGet, f.R(srv).URL()+"/v1/tasks/"+sr.ID+"/trail", tokGlobex, nil).Want(t, http.StatusNotFound)
			f.Call(http.MethodPost, f.R(srv).URL()+"/v1/tasks/"+sr.ID+"/cancel", tokGlobexOps, nil).Want(t, http.StatusNotFound)
			f.Call(http.MethodPost, f.R(srv).URL()+"/v1/tasks/"+sr.ID+"/priority", tokGlobexOps, spec{"priority": 0}).Want(t, http.StatusNotFound)
			// Its owner sees it from every server.
			tk, rep := f.GetTask(srv, tokAcme, sr.ID)
			rep.Want(t, http.StatusOK)
			if tk.ID != sr.ID || tk.Tenant != "acme" || tk.HeldBy != aws {
				t.Fatalf("GET on %s: %+v", srv, tk)
			}
		}
		if tk, _ := f.R(aws).Store.Get(ctx, sr.ID); tk.State != task.Ready {
			t.Fatalf("another tenant's cancel touched the task: %s", tk.State)
		}
		for _, id := range []string{"nope", "0000000000000000.0.aws-use1", "0000000000000000.0.gcp-euw4", "0000000000000000.0.mars-1"} {
			_, rep := f.GetTask(gcp, tokAcme, id)
			if rep.Status != http.StatusNotFound && !(strings.HasSuffix(id, "mars-1") && rep.Status == http.StatusServiceUnavailable) {
				t.Fatalf("GET %s: %d %s", id, rep.Status, rep.Body)
			}
		}
		rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/nothing-here", tokAcme, nil).Want(t, http.StatusNotFound)
		if rep.Err(t).Code != apiv1.CodeNotFound {
			t.Fatal(string(rep.Body))
		}
	})

	t.Run("idempotent repeat 200, reused key 409", func(t *testing.T) {
		sp := spec{"type": "pay.out", "tags": x86, "idempotency_key": "po-77", "payload": map[string]any{"amount": 12}}
		first := f.SubmitOK(gcp, tokAcme, sp)
		// The same spec, spelled differently (payload whitespace, a delay).
		var again apiv1.SubmitResponse
		f.Call(http.MethodPost, f.R(gcp).URL()+"/v1/tasks", tokAcme,
			`{"payload": {"amount":12},"idempotency_key":"po-77","tags":{"arch":"x86"},"type":"pay.out"}`).Want(t, http.StatusOK).JSON(t, &again)
		if again.ID != first.ID || !again.Duplicate {
			t.Fatalf("repeat: %+v, first %+v", again, first)
		}
		sp["payload"] = map[string]any{"amount": 13}
		rep := f.Submit(gcp, tokAcme, sp).Want(t, http.StatusConflict)
		if e := rep.Err(t); e.Code != apiv1.CodeConflict || e.Field != "idempotency_key" {
			t.Fatalf("409: %s", rep.Body)
		}
	})

	t.Run("413 above 64 KiB", func(t *testing.T) {
		big := strings.Repeat("a", 64<<10)
		// A payload just over 64 KiB, the default (the body fits the read limit).
		rep := f.Call(http.MethodPost, tasks, tokAcme, `{"type":"x","payload":"`+big+`"}`).Want(t, http.StatusRequestEntityTooLarge)
		if e := rep.Err(t); e.Code != apiv1.CodeTooLarge || e.Field != "payload" {
			t.Fatalf("413: %s", rep.Body)
		}
		// A body far over it.
		rep = f.Call(http.MethodPost, tasks, tokAcme, `{"type":"x","payload":"`+big+big+`"}`).Want(t, http.StatusRequestEntityTooLarge)
		if rep.Err(t).Code != apiv1.CodeTooLarge {
			t.Fatalf("413: %s", rep.Body)
		}
		// Exactly 64 KiB is allowed: the JSON string with its quotes.
		f.Call(http.MethodPost, tasks, tokAcme, `{"type":"x","regions":["aws-use1"],"payload":"`+big[:64<<10-2]+`"}`).Want(t, http.StatusCreated)
		// In a batch, the item says it.
		var br apiv1.BatchResponse
		f.Call(http.MethodPost, tasks+"/batch", tokAcme, `{"tasks":[{"type":"x","regions":["aws-use1"]},{"type":"x","payload":"`+big+`"}]}`).
			Want(t, http.StatusOK).JSON(t, &br)
		if br.Results[0].Status != http.StatusCreated || br.Results[1].Status != http.StatusRequestEntityTooLarge ||
			br.Results[1].Error.Field != "tasks[1].payload" {
			t.Fatalf("batch with a large item: %+v", br.Results)
		}
	})

	t.Run("422 unplaceable with the explanation", func(t *testing.T) {
		rep := f.Submit(aws, tokAcme, spec{"type": "x", "tags": map[string]string{"gpu": "l4"}, "regions": []string{gcp, az}}).
			Want(t, http.StatusUnprocessableEntity)
		e := rep.Err(t)
		if e.Code != apiv1.CodeUnplaceable || e.Explanation == nil || e.Explanation.Outcome != "UNPLACEABLE" {
			t.Fatalf("422: %s", rep.Body)
		}
		for _, c := range e.Explanation.Candidates {
			if c.Rejected != "TAG_MISMATCH" && c.Rejected != "REGION_EXCLUDED" {
				t.Fatalf("candidate %+v", c)
			}
			// Each reason carries its figure.
			want := map[string]string{gcp + "/" + poolGPU: "needs gpu=l4; the pool has gpu=a100", gcp + "/" + poolCPU: "needs gpu=l4; the pool has no gpu",
				aws + "/" + poolGPU: "the task allows only " + gcp + ", " + az}[c.Region+"/"+c.Pool]
			if want != "" && c.Detail != want {
				t.Errorf("%s/%s: detail %q, want %q", c.Region, c.Pool, c.Detail, want)
			}
		}
	})

	t.Run("max_price_per_slot_hour: never placed above it", func(t *testing.T) {
		// AWS's pools for x86: spot $0.02215/h, on-demand $0.048/h.
		sr := f.SubmitOK(aws, tokAcme, spec{"type": "capped", "tags": x86, "regions": []string{aws}, "max_price_per_slot_hour": 0.03})
		if deref(sr.Pool) != poolSpot {
			t.Fatalf("capped at $0.03/h: %+v", sr)
		}
		rep := f.Submit(aws, tokAcme, spec{"type": "capped", "tags": x86, "regions": []string{aws}, "max_price_per_slot_hour": 0.02}).
			Want(t, http.StatusUnprocessableEntity)
		e := rep.Err(t)
		if e.Code != apiv1.CodeUnplaceable || e.Explanation == nil || e.Explanation.Outcome != "UNPLACEABLE" {
			t.Fatalf("422: %s", rep.Body)
		}
		over := 0
		for _, c := range e.Explanation.Candidates {
			if c.Rejected == "OVER_PRICE_CAP" {
				over++
				if !strings.Contains(c.Detail, "> max_price_per_slot_hour $0.02/h") {
					t.Errorf("%s/%s: detail %q", c.Region, c.Pool, c.Detail)
				}
			}
		}
		if over != 2 {
			t.Fatalf("%d pools over the cap, want AWS's two: %s", over, rep.Body)
		}
		for _, bad := range []any{-1, "cheap", 1e7} {
			rep := f.Submit(aws, tokAcme, spec{"type": "capped", "max_price_per_slot_hour": bad}).Want(t, http.StatusBadRequest)
			if rep.Err(t).Field != "max_price_per_slot_hour" {
				t.Fatalf("%v: %s", bad, rep.Body)
			}
		}
	})

	t.Run("max_wait: the task's own wait target", func(t *testing.T) {
		ex := f.Explain(aws, spec{"type": "waits", "tags": x86, "max_wait": "3s"})
		n := 0
		for _, c := range ex.Candidates {
			if c.Rejected == "" {
				n++
				if c.WaitTargetSeconds != 3 {
					t.Errorf("%s/%s: wait target %v, want the task's 3 s", c.Region, c.Pool, c.WaitTargetSeconds)
				}
			}
		}
		if n == 0 || ex.Rule != "cheapest_within_wait" {
			t.Fatalf("explain with max_wait: rule %q, %d eligible", ex.Rule, n)
		}
		sr := f.SubmitOK(aws, tokAcme, spec{"type": "waits", "tags": x86, "max_wait": "90s"})
		if tk, _ := f.GetTask(aws, tokAcme, sr.ID); time.Duration(tk.MaxWait) != 90*time.Second {
			t.Fatalf("stored max_wait %v, want 90s", time.Duration(tk.MaxWait))
		}
		for _, bad := range []any{"-1s", "soon", "800h"} {
			rep := f.Submit(aws, tokAcme, spec{"type": "waits", "max_wait": bad}).Want(t, http.StatusBadRequest)
			if rep.Err(t).Field != "max_wait" {
				t.Fatalf("%v: %s", bad, rep.Body)
			}
		}
	})

	t.Run("429 when every candidate is saturated; critical still admitted", func(t *testing.T) {
		l4 := spec{"type": "infer", "tags": map[string]string{"gpu": "l4"}}
		var rep reply
		for i := 0; i < 30; i++ {
			if rep = f.Submit(aws, tokAcme, l4); rep.Status != http.StatusCreated {
				break
			}
		}
		rep.Want(t, http.StatusTooManyRequests)
		e := rep.Err(t)
		if e.Code != apiv1.CodeSaturated || rep.Header.Get("Retry-After") != "2" || e.RetryAfterSeconds != 2 {
			t.Fatalf("429: %v %s", rep.Header, rep.Body)
		}
		if e.Explanation == nil || e.Explanation.Outcome != "SATURATED" {
			t.Fatalf("429 without the explanation: %s", rep.Body)
		}
		for _, c := range e.Explanation.Candidates {
			if c.Rejected == "SATURATED" && !strings.Contains(c.Detail, "hard watermark") {
				t.Errorf("%s/%s: SATURATED without its figure: %q", c.Region, c.Pool, c.Detail)
			}
		}
		// The refusal counts against the saturated pool (the L4 pool is
		// aws's only GPU pool), in /metrics and per pool in /v1/regions.
		rep = f.Call(http.MethodGet, f.R(aws).URL()+"/metrics", tokOperator, nil).Want(t, http.StatusOK)
		if !regexp.MustCompile(`(?m)^ax_pool_refusals_total\{pool="` + poolGPU + `",region="` + aws + `",target="` + aws + `"\} [1-9]`).Match(rep.Body) {
			t.Errorf("/metrics lacks the L4 pool's refusal:\n%s", regexp.MustCompile(`(?m)^ax_pool_refusals_total.*$`).FindAll(rep.Body, -1))
		}
		pool := func(rr apiv1.RegionsResponse, region, name string) (p apiv1.PoolStatus) {
			for _, r := range rr.Regions {
				for _, q := range r.Pools {
					if r.Name == region && q.Name == name {
						p = q
					}
				}
			}
			return p
		}
		var rr apiv1.RegionsResponse
		f.Call(http.MethodGet, f.R(aws).URL()+"/v1/regions", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &rr)
		if r := pool(rr, aws, poolGPU).RefusedPerMinute; r == nil || *r < 1 {
			t.Errorf("/v1/regions: the L4 pool's refusals per minute %v, want ≥ 1", r)
		}
		if r := pool(rr, aws, poolCPU).RefusedPerMinute; r == nil || *r != 0 {
			t.Errorf("/v1/regions: the CPU pool refused nothing, yet %v", r)
		}
		l4["critical"] = true
		// critical bypasses backpressure: an operator's to ask for; a
		// submitter gets 403 naming the field.
		if e := f.Submit(aws, tokAcme, l4).Want(t, http.StatusForbidden).Err(t); e.Field != "critical" {
			t.Fatalf("a submitter's critical task: %+v", e)
		}
		sr := f.SubmitOK(aws, tokOperator, l4)
		if sr.Region != aws || deref(sr.Pool) != poolGPU {
			t.Fatalf("critical task: %+v", sr)
		}
		// Other servers refuse it too (they place with the same figures).
		delete(l4, "critical")
		fedtest.Eventually(t, 5*time.Second, "GCP sees the L4 pool saturated", func() bool {
			return f.Submit(gcp, tokAcme, l4).Status == http.StatusTooManyRequests
		})
	})

	t.Run("batch: per-item results with tasks[i].field", func(t *testing.T) {
		body := `{"tasks":[
			{"type":"batch.ok","tags":{"arch":"x86"}},
			{"type":"batch.bad","priority":7},
			{"type":"batch.bad","colour":"red"},
			{"type":"batch.bad","priority":"low"},
			{"type":"batch.none","tags":{"gpu":"tpu"}},
			{"type":"batch.keyed","idempotency_key":"b-1"},
			{"type":"batch.keyed","idempotency_key":"b-1"},
			{"type":"batch.keyed","idempotency_key":"b-1","priority":1},
			{"type":"batch.bad","regions":["aws-use1","x y"]}
		]}`
		var br apiv1.BatchResponse
		f.Call(http.MethodPost, tasks+"/batch", tokAcme, body).Want(t, http.StatusOK).JSON(t, &br)
		want := []struct {
			status int
			field  string
		}{{201, ""}, {400, "tasks[1].priority"}, {400, "tasks[2].colour"}, {400, "tasks[3].priority"}, {422, ""},
			{201, ""}, {200, ""}, {409, "tasks[7].idempotency_key"}, {400, "tasks[8].regions[1]"}}
		if len(br.Results) != len(want) {
			t.Fatalf("%d results", len(br.Results))
		}
		for i, w := range want {
			it := br.Results[i]
			field := ""
			if it.Error != nil {
				field = it.Error.Field
				if it.Error.Code == "" || it.Error.Message == "" {
					t.Errorf("item %d: error without code or message: %+v", i, it.Error)
				}
			}
			if it.Status != w.status || field != w.field || (it.Error == nil) != (it.Task != nil) {
				t.Errorf("item %d: status %d field %q (%+v), want %d %q", i, it.Status, field, it, w.status, w.field)
			}
		}
		if br.Results[5].Task == nil || br.Results[6].Task == nil || br.Results[5].Task.ID != br.Results[6].Task.ID {
			t.Errorf("a key repeated inside a batch makes two tasks")
		}
		if br.Accepted != 3 || br.Rejected != 6 {
			t.Errorf("accepted %d rejected %d", br.Accepted, br.Rejected)
		}
		f.Call(http.MethodPost, tasks+"/batch", tokAcme, `{"tasks":[]}`).Want(t, http.StatusBadRequest)
		f.Call(http.MethodPost, tasks+"/batch", tokAcme, `{"tasks":{}}`).Want(t, http.StatusBadRequest)
		f.Call(http.MethodPost, tasks+"/batch", tokAcme, `{"tasks":[],"extra":1}`).Want(t, http.StatusBadRequest)
		items := make([]string, 1001)
		for i := range items {
			items[i] = `{"type":"x"}`
		}
		rep := f.Call(http.MethodPost, tasks+"/batch", tokAcme, `{"tasks":[`+strings.Join(items, ",")+`]}`).Want(t, http.StatusBadRequest)
		if rep.Err(t).Field != "tasks" {
			t.Fatalf("1001 tasks: %s", rep.Body)
		}
	})

	t.Run("get, trail, cancel, priority of one task", func(t *testing.T) {
		sr := f.SubmitOK(aws, tokAcme, local("op.target"))
		tk, rep := f.GetTask(gcp, tokAcme, sr.ID) // forwarded to its home
		rep.Want(t, http.StatusOK)
		if tk.State != task.Ready || tk.Pool != poolSpot || tk.Type != "op.target" || tk.Priority != 2 || tk.CreatedAt.IsZero() {
			t.Fatalf("GET: %+v", tk)
		}
		tr := f.Trail(gcp, tokAcme, sr.ID)
		if len(tr) == 0 || tr[0].To != task.Ready || tr[0].Reason != task.ReasonPlaced {
			t.Fatalf("trail: %+v", tr)
		}
		for _, tc := range []struct {
			body  string
			field string
		}{{`{"priority":7}`, "priority"}, {`{}`, "priority"}, {`{"priority":"x"}`, "priority"}, {`{"priority":1,"why":"x"}`, "why"}} {
			rep := f.Call(http.MethodPost, tasks+"/"+sr.ID+"/priority", tokOperator, tc.body).Want(t, http.StatusBadRequest)
			if rep.Err(t).Field != tc.field {
				t.Fatalf("priority %s: %s", tc.body, rep.Body)
			}
		}
		var after task.Task
		f.Call(http.MethodPost, f.R(az).URL()+"/v1/tasks/"+sr.ID+"/priority", tokOperator, spec{"priority": 0}).Want(t, http.StatusOK).JSON(t, &after)
		if after.Priority != 0 || after.ID != sr.ID || after.State != task.Ready {
			t.Fatalf("after the priority change: %+v", after)
		}
		if !fedtest.HasReason(f.Trail(aws, tokAcme, sr.ID), task.ReasonPriority) {
			t.Fatal("the trail lacks PRIORITY_CHANGED")
		}
		var cr apiv1.CancelResponse
		f.Call(http.MethodPost, f.R(az).URL()+"/v1/tasks/"+sr.ID+"/cancel", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &cr)
		if cr.State != task.Canceled || cr.Requested {
			t.Fatalf("cancel: %+v", cr)
		}
		rep = f.Call(http.MethodPost, tasks+"/"+sr.ID+"/cancel", tokOperator, nil).Want(t, http.StatusConflict)
		if e := rep.Err(t); e.Code != apiv1.CodeFailedPrecond || e.Field != "state" {
			t.Fatalf("cancel twice: %s", rep.Body)
		}
		// A finished task's priority cannot change: 409 naming its state,
		// and the record keeps its priority.
		rep = f.Call(http.MethodPost, tasks+"/"+sr.ID+"/priority", tokOperator, spec{"priority": 3}).Want(t, http.StatusConflict)
		if e := rep.Err(t); e.Code != apiv1.CodeFailedPrecond || e.Field != "state" || !strings.Contains(e.Message, "CANCELED") {
			t.Fatalf("priority of a canceled task: %s", rep.Body)
		}
		if got, _ := f.GetTask(aws, tokAcme, sr.ID); got.Priority != 0 {
			t.Fatalf("a refused priority change changed the task: %+v", got)
		}
		// A RUNNING task: the cancel is a request.
		run := f.SubmitOK(aws, tokOperator, spec{"type": "op.running", "tags": x86, "regions": []string{aws}, "priority": 0, "tenant": "acme"})
		held, err := f.R(aws).Store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: poolSpot, Worker: "w-op", N: 1})
		if err != nil || len(held) != 1 || held[0].ID != run.ID {
			t.Fatalf("claim: %+v %v", held, err)
		}
		// Its priority may change (docs/architecture.md §7): it keeps
		// running, preemption and a retry read the new one.
		var bumped task.Task
		f.Call(http.MethodPost, tasks+"/"+run.ID+"/priority", tokOperator, spec{"priority": 3}).Want(t, http.StatusOK).JSON(t, &bumped)
		if bumped.State != task.Running || bumped.Priority != 3 {
			t.Fatalf("priority of a running task: %+v", bumped)
		}
		f.Call(http.MethodPost, tasks+"/"+run.ID+"/cancel", tokAdmin, nil).Want(t, http.StatusOK).JSON(t, &cr)
		if cr.State != task.Running || !cr.Requested {
			t.Fatalf("cancel of a running task: %+v", cr)
		}
		stops, err := f.R(aws).Store.Claimer().Heartbeat(ctx, "w-op", poolSpot, 1, queue.Types{}, []queue.Lease{{ID: run.ID, Token: held[0].LeaseToken}})
		if err != nil || len(stops) != 1 || stops[0].Why != queue.StopCanceled {
			t.Fatalf("the worker learns the cancel at its heartbeat: %+v %v", stops, err)
		}
		// A handed-off task is cancelled where it went, through its home.
		away := f.SubmitOK(aws, tokAcme, spec{"type": "op.away", "tags": x86})
		if away.Region != az {
			t.Fatalf("placed on %s", away.Region)
		}
		fedtest.Eventually(t, 5*time.Second, "handed off", func() bool {
			tk, _ := f.R(aws).Store.Get(ctx, away.ID)
			return tk.State == task.HandedOff
		})
		f.Call(http.MethodPost, f.R(gcp).URL()+"/v1/tasks/"+away.ID+"/cancel", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &cr)
		if tk, _ := f.R(az).Store.Get(ctx, away.ID); cr.State != task.Canceled || tk.State != task.Canceled {
			t.Fatalf("cancel through the home: %+v, target record %s", cr, tk.State)
		}
	})

	t.Run("bulk cancel by filter", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			f.SubmitOK(aws, tokAcme, local("bulk.me"))
			f.SubmitOK(aws, tokAcme, local("bulk.keep"))
		}
		for i := 0; i < 2; i++ {
			f.SubmitOK(aws, tokGlobex, local("bulk.me"))
		}
		f.SubmitOK(aws, tokAcme, spec{"type": "bulk.me", "regions": []string{aws}, "tags": x86, "delay": "1h"})
		f.Call(http.MethodPost, tasks+"/cancel", tokOperator, spec{}).Want(t, http.StatusBadRequest)
		rep := f.Call(http.MethodPost, tasks+"/cancel", tokOperator, spec{"type": "bulk.me", "state": "RUNNING"}).Want(t, http.StatusBadRequest)
		if rep.Err(t).Field != "state" {
			t.Fatal(string(rep.Body))
		}
		f.Call(http.MethodPost, tasks+"/cancel", tokGlobexOps, spec{"type": "bulk.me", "tenant": "acme"}).Want(t, http.StatusForbidden)
		var bc apiv1.BulkCancelResponse
		// A tenant's operator cancels only its tenant's tasks.
		f.Call(http.MethodPost, tasks+"/cancel", tokGlobexOps, spec{"type": "bulk.me"}).Want(t, http.StatusOK).JSON(t, &bc)
		if bc.Canceled != 2 {
			t.Fatalf("globex's operator cancelled %d, want its 2", bc.Canceled)
		}
		f.Call(http.MethodPost, tasks+"/cancel", tokOperator, spec{"type": "bulk.me", "state": "READY"}).Want(t, http.StatusOK).JSON(t, &bc)
		if bc.Canceled != 5 {
			t.Fatalf("cancelled %d READY, want 5", bc.Canceled)
		}
		f.Call(http.MethodPost, tasks+"/cancel", tokOperator, spec{"type": "bulk.me", "tenant": "acme"}).Want(t, http.StatusOK).JSON(t, &bc)
		if bc.Canceled != 1 {
			t.Fatalf("cancelled %d PENDING, want the delayed one", bc.Canceled)
		}
		n := 0
		_ = f.R(aws).Store.Tasks().Waiting(ctx, queue.Filter{Type: "bulk.keep"}, func(ts []*task.Task) error { n += len(ts); return nil })
		if n != 5 {
			t.Fatalf("the filter hit other types: %d of 5 bulk.keep left", n)
		}
	})

	t.Run("Python client (clients/python)", func(t *testing.T) { pythonClient(t, f) })

	t.Run("dead letters: list and replay", func(t *testing.T) {
		sr := f.SubmitOK(aws, tokAcme, spec{"type": "dlq.poison", "tags": x86, "regions": []string{aws}, "priority": 1, "max_retries": 0})
		held, err := f.R(aws).Store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: poolSpot, Worker: "w-dlq", N: 1})
		if err != nil || len(held) != 1 || held[0].ID != sr.ID {
			t.Fatalf("claim: %+v %v", held, err)
		}
		st, _, err := f.R(aws).Store.Claimer().Fail(ctx, queue.Failure{ID: sr.ID, Token: held[0].LeaseToken, Error: "boom", Retryable: true})
		if err != nil || st != task.Failed {
			t.Fatalf("fail: %s %v", st, err)
		}
		var dl apiv1.TaskList
		f.Call(http.MethodGet, f.R(aws).URL()+"/v1/dlq?type=dlq.poison", tokAcme, nil).Want(t, http.StatusOK).JSON(t, &dl)
		if len(dl.Tasks) != 1 || dl.Tasks[0].ID != sr.ID || dl.Tasks[0].LastError != "boom" || dl.Tasks[0].State != task.Failed {
			t.Fatalf("dlq: %+v", dl.Tasks)
		}
		f.Call(http.MethodGet, f.R(aws).URL()+"/v1/dlq", tokGlobex, nil).Want(t, http.StatusOK).JSON(t, &dl)
		if len(dl.Tasks) != 0 {
			t.Fatalf("globex sees acme's dead letters: %+v", dl.Tasks)
		}
		if e := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/dlq?tenant=acme", tokGlobex, nil).Want(t, http.StatusForbidden).Err(t); e.Field != "tenant" {
			t.Errorf("globex naming acme's dead letters: %+v, want 403 naming tenant", e)
		}
		f.Call(http.MethodGet, f.R(aws).URL()+"/v1/dlq?type=other", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &dl)
		if len(dl.Tasks) != 0 {
			t.Fatalf("type filter: %+v", dl.Tasks)
		}
		for _, q := range []string{"limit=0", "limit=x", "offset=-1", "offset=10001", "offset=9223372036854775807", "offset=99999999999999999999"} {
			rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/dlq?"+q, tokOperator, nil).Want(t, http.StatusBadRequest)
			if field := rep.Err(t).Field; field != strings.Split(q, "=")[0] {
				t.Fatalf("%s: field %q", q, field)
			}
		}
		var replayed task.Task
		f.Call(http.MethodPost, f.R(gcp).URL()+"/v1/tasks/"+sr.ID+"/replay", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &replayed)
		if replayed.ID != sr.ID || replayed.State == task.Failed {
			t.Fatalf("replay: %+v", replayed)
		}
		fedtest.Eventually(t, 5*time.Second, "the replayed task is placed again", func() bool {
			tk, _ := f.GetTask(aws, tokAcme, sr.ID)
			return tk.State == task.Ready
		})
		if !fedtest.HasReason(f.Trail(aws, tokAcme, sr.ID), task.ReasonReplayed) {
			t.Fatal("trail lacks REPLAYED")
		}
		f.Call(http.MethodPost, tasks+"/"+sr.ID+"/replay", tokOperator, nil).Want(t, http.StatusConflict)
	})

	t.Run("cost report across regions, by tenant", func(t *testing.T) {
		// acme's task runs in AWS; globex's is submitted to AWS and handed
		// off to GCP, whose spend it is.
		a := f.SubmitOK(aws, tokAcme, spec{"type": "cost.probe", "tags": x86, "regions": []string{aws}, "priority": 1})
		g := f.SubmitOK(aws, tokGlobex, spec{"type": "cost.probe", "tags": x86, "regions": []string{gcp}, "priority": 1})
		// and one on the reference pool itself: no savings, exactly.
		o := f.SubmitOK(aws, tokAcme, spec{"type": "cost.probe", "tags": map[string]string{"arch": "x86", "class": "on-demand"},
			"regions": []string{aws}, "priority": 1})
		fedtest.Eventually(t, 10*time.Second, "the hand-off to GCP", func() bool {
			w := f.Where(ctx, g.ID)
			return len(w) == 1 && w[0] == gcp
		})
		probeType, err := queue.ServeTypes("cost.probe")
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range []struct{ region, pool, id string }{{aws, poolSpot, a.ID}, {gcp, poolSpot, g.ID}, {aws, poolCPU, o.ID}} {
			held, err := f.R(run.region).Store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: run.pool, Worker: "w-cost", N: 1,
				Price: fedtest.PriceOf(run.region, run.pool), Types: probeType})
			if err != nil || len(held) != 1 || held[0].ID != run.id {
				t.Fatalf("claim in %s: %+v %v", run.region, held, err)
			}
			time.Sleep(100 * time.Millisecond)
			if _, err := f.R(run.region).Store.Claimer().Complete(ctx, queue.Completion{ID: run.id, Token: held[0].LeaseToken}); err != nil {
				t.Fatal(err)
			}
		}
		probe := func(rep apiv1.CostReport) map[string]apiv1.CostRow {
			m := map[string]apiv1.CostRow{}
			for _, r := range rep.Rows {
				if r.Type == "cost.probe" {
					m[r.Tenant+" "+r.Region+" "+r.Pool] = r
				}
			}
			return m
		}
		// The cheapest on-demand pool carrying arch=x86: AWS's (and AZ's) cpu.
		ref := fedtest.PriceOf(aws, "cpu")
		var rep apiv1.CostReport
		f.Call(http.MethodGet, f.R(az).URL()+"/v1/cost?group_by=tenant,type,pool,region", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &rep)
		rows := probe(rep)
		for _, w := range []struct{ key, region string }{{"acme " + aws + " " + poolSpot, aws}, {"globex " + gcp + " " + poolSpot, gcp}} {
			r, ok := rows[w.key]
			if !ok || r.Runs != 1 || r.FailedRuns != 0 || r.SpotRuns != 1 || r.RunSeconds < 0.1 || r.RunSeconds > 5 {
				t.Fatalf("%s: %+v (rows %+v)", w.key, r, rep.Rows)
			}
			price := fedtest.PriceOf(w.region, poolSpot)
			if d := r.SpendUSD - price*r.RunSeconds/3600; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: spend %g, want %g × %gs", w.key, r.SpendUSD, price, r.RunSeconds)
			}
			if d := r.ReferenceUSD - ref*r.RunSeconds/3600; d > 1e-9 || d < -1e-9 || r.SavingsUSD <= 0 ||
				r.SavingsUSD-(r.ReferenceUSD-r.SpendUSD) > 1e-12 {
				t.Errorf("%s: reference %g savings %g, want %g × %gs", w.key, r.ReferenceUSD, r.SavingsUSD, ref, r.RunSeconds)
			}
		}
		if r := rows["acme "+aws+" "+poolCPU]; r.Runs != 1 || r.SavingsUSD != 0 || r.ReferenceUSD != r.SpendUSD {
			t.Errorf("a run on the reference pool itself: %+v; want savings 0 (not the records' rounding)", r)
		}
		if len(rep.Unavailable) != 0 || len(rep.Regions) != 3 || rep.Total.Runs < 2 {
			t.Fatalf("regions %+v unavailable %v total %+v", rep.Regions, rep.Unavailable, rep.Total)
		}
		// A tenant's token sees its own tenant only: naming another is 403
		// (as its submits and listings), never a quiet report of its own.
		rep403 := f.Call(http.MethodGet, f.R(gcp).URL()+"/v1/cost?group_by=tenant,region&tenant=globex", tokAcme, nil).Want(t, http.StatusForbidden)
		if e := rep403.Err(t); e.Code != apiv1.CodeForbidden || e.Field != "tenant" || !strings.Contains(e.Message, "tenant acme") {
			t.Errorf("acme asking for globex's cost: %+v", e)
		}
		f.Call(http.MethodGet, f.R(gcp).URL()+"/v1/cost?group_by=tenant,region&tenant=acme", tokAcme, nil).Want(t, http.StatusOK).JSON(t, &rep)
		for _, r := range rep.Rows {
			if r.Tenant != "acme" {
				t.Fatalf("acme's token sees %+v", r)
			}
		}
		if len(rep.Rows) == 0 || rep.GroupBy[0] != "tenant" {
			t.Fatalf("acme's report: %+v", rep)
		}
		for q, field := range map[string]string{"group_by=color": "group_by", "from=2026-13-01": "from",
			"from=2026-11-02&to=2026-11-01": "to", "from=2020-01-01&to=2026-01-01": "to", "typ=x": "typ"} {
			rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/cost?"+q, tokOperator, nil).Want(t, http.StatusBadRequest)
			if got := rep.Err(t).Field; got != field {
				t.Errorf("%s: field %q, want %q", q, got, field)
			}
		}
	})

	t.Run("tasks: listing across regions", func(t *testing.T) {
		mk := func(regions []string, payload string) string {
			return f.SubmitOK(aws, tokAcme, spec{"type": "list.probe", "tags": x86, "regions": regions, "payload": json.RawMessage(payload)}).ID
		}
		a1 := mk([]string{aws}, `{"k":"one"}`)
		away := mk([]string{gcp}, `{"k":"needle"}`)
		a2 := mk([]string{aws}, `{"k":"two"}`)
		list := func(server, tok, q string) apiv1.TaskList {
			t.Helper()
			var tl apiv1.TaskList
			f.Call(http.MethodGet, f.R(server).URL()+"/v1/tasks?"+q, tok, nil).Want(t, http.StatusOK).JSON(t, &tl)
			return tl
		}
		// Asked in the third region: the hand-off to GCP is listed once, as GCP holds it.
		fedtest.Eventually(t, 10*time.Second, "the task handed to GCP is listed as GCP's", func() bool {
			tl := list(az, tokOperator, "type=list.probe")
			return len(tl.Tasks) == 3 && tl.Tasks[1].ID == away && tl.Tasks[1].HeldBy == gcp && tl.Tasks[1].State == task.Ready
		})
		tl := list(az, tokOperator, "type=list.probe")
		if tl.Tasks[0].ID != a2 || tl.Tasks[2].ID != a1 || tl.Tasks[0].HeldBy != aws || len(tl.Unavailable) != 0 || tl.NextCursor != "" {
			t.Fatalf("listing: %+v", tl)
		}
		if tl.Tasks[0].Payload != nil {
			t.Fatalf("a listing carries payloads: %s", tl.Tasks[0].Payload)
		}
		// Pages of 2 by cursor, then the rest.
		p1 := list(gcp, tokAcme, "type=list.probe&limit=2")
		if len(p1.Tasks) != 2 || p1.NextCursor == "" {
			t.Fatalf("page 1: %+v", p1)
		}
		p2 := list(gcp, tokAcme, "type=list.probe&limit=2&cursor="+p1.NextCursor)
		if len(p2.Tasks) != 1 || p2.Tasks[0].ID != a1 || p2.NextCursor != "" {
			t.Fatalf("page 2: %+v", p2)
		}
		if tl := list(aws, tokGlobex, "type=list.probe"); len(tl.Tasks) != 0 {
			t.Fatalf("globex lists acme's tasks: %+v", tl.Tasks)
		}
		if tl := list(aws, tokOperator, "type=list.probe&region="+gcp); len(tl.Tasks) != 1 || tl.Tasks[0].ID != away {
			t.Fatalf("region=gcp: %+v", tl.Tasks)
		}
		if tl := list(aws, tokOperator, "type=list.probe&payload=needle"); len(tl.Tasks) != 1 || tl.Tasks[0].ID != away {
			t.Fatalf("payload=needle: %+v", tl.Tasks)
		}
		if tl := list(aws, tokOperator, "type=list.probe&state=running"); len(tl.Tasks) != 0 {
			t.Fatalf("state=running: %+v", tl.Tasks)
		}
		if tl := list(aws, tokOperator, "type=list.probe&created_before=2000-01-01T00:00:00Z"); len(tl.Tasks) != 0 {
			t.Fatalf("created_before 2000: %+v", tl.Tasks)
		}
		rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/tasks?payload=needle", tokAcme, nil).Want(t, http.StatusForbidden)
		if rep.Err(t).Field != "payload" {
			t.Fatalf("payload as a submitter: %s", rep.Body)
		}
		f.Call(http.MethodGet, f.R(aws).URL()+"/v1/tasks?tenant=globex", tokAcme, nil).Want(t, http.StatusForbidden)
		for q, field := range map[string]string{"state=DONE": "state", "created_after=yesterday": "created_after",
			"created_after=2026-12-02T00:00:00Z&created_before=2026-12-01T00:00:00Z": "created_before",
			"limit=0": "limit", "limit=1001": "limit", "cursor=zz": "cursor", "colour=red": "colour",
			"region=nowhere": "region", "type=a&type=b": "type"} {
			rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/tasks?"+q, tokOperator, nil).Want(t, http.StatusBadRequest)
			fedtest.CheckErrorShape(t, q, rep)
			if got := rep.Err(t).Field; got != field {
				t.Fatalf("%s: field %q, want %q", q, got, field)
			}
		}
	})

	t.Run("regions, explain, events", func(t *testing.T) {
		var rr apiv1.RegionsResponse
		f.Call(http.MethodGet, f.R(az).URL()+"/v1/regions", tokGlobex, nil).Want(t, http.StatusOK).JSON(t, &rr)
		if !rr.GlobalView || len(rr.Regions) != 3 {
			t.Fatalf("regions: %+v", rr)
		}
		for i, r := range rr.Regions {
			if r.Name != []string{aws, az, gcp}[i] {
				t.Fatalf("regions not sorted: %+v", rr.Regions)
			}
			if !r.Healthy || r.API == "" || r.Leader == "" || len(r.Pools) != 3 || r.UpdatedAt.IsZero() {
				t.Fatalf("region %+v", r)
			}
			for _, p := range r.Pools {
				if p.PricePerSlotHour != fedtest.PriceOf(r.Name, p.Name) || p.Slots == 0 || p.QueueCapacity == 0 || p.Tags == nil {
					t.Fatalf("pool %s/%+v", r.Name, p)
				}
			}
		}
		rep := f.Call(http.MethodPost, f.R(aws).URL()+"/v1/placement/explain", tokAcme, `{"type":"x","priority":11}`).Want(t, http.StatusBadRequest)
		if rep.Err(t).Field != "priority" {
			t.Fatal(string(rep.Body))
		}
		// A region outside the federation is 400 naming it, as a submit is.
		rep = f.Call(http.MethodPost, f.R(aws).URL()+"/v1/placement/explain", tokAcme, `{"type":"x","regions":["mars-1"]}`).Want(t, http.StatusBadRequest)
		if e := rep.Err(t); e.Field != "regions[0]" || !strings.Contains(e.Message, `no region "mars-1"`) {
			t.Fatal(string(rep.Body))
		}
		var ev apiv1.EventsResponse
		f.Call(http.MethodGet, f.R(aws).URL()+"/v1/events?after=0&wait=10ms", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &ev)
		if ev.Region != aws || len(ev.Events) == 0 || ev.Next == "" {
			t.Fatalf("events: %+v", ev)
		}
		f.Call(http.MethodGet, f.R(aws).URL()+"/v1/events?region="+gcp+"&after=0&wait=10ms", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &ev)
		if ev.Region != gcp {
			t.Fatalf("events of another region: %+v", ev.Region)
		}
		f.Call(http.MethodGet, f.R(aws).URL()+"/v1/events?wait=2h", tokOperator, nil).Want(t, http.StatusBadRequest)
		// A malformed after= is the caller's 400, not Redis's error (503).
		for _, after := range []string{"x", "1-x", "-1", "99999999999999999999-0", "0,1-2-3"} {
			if e := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/events?wait=0s&after="+url.QueryEscape(after), tokOperator, nil).
				Want(t, http.StatusBadRequest).Err(t); e.Field != "after" {
				t.Fatalf("after=%s: field %q, want after", after, e.Field)
			}
		}
	})

	t.Run("live updates (GET /v1/stream)", func(t *testing.T) { streamContract(t, f) })
	t.Run("on_behalf_of only from the cluster token", func(t *testing.T) { onBehalfOf(t, f) })
	t.Run("OpenAPI examples and answers match the spec", func(t *testing.T) { openAPIConformance(t, f) })

	t.Run("a long wait for another region's events", func(t *testing.T) {
		p := <-quiet
		var ev apiv1.EventsResponse
		p.rep.Want(t, http.StatusOK).JSON(t, &ev)
		if ev.Region != gcp || len(ev.Events) != 0 || p.took > 9*time.Second {
			t.Errorf("after %v: %+v, want gcp's empty answer within 5 s", p.took, ev)
		}
	})

	// Last: it takes the region's Redis away.
	t.Run("readyz 503 without the region's Redis", func(t *testing.T) {
		f.R(az).Redis.Kill()
		rep := f.Call(http.MethodGet, f.R(az).URL()+"/readyz", tokAcme, nil)
		if rep.Status != http.StatusServiceUnavailable {
			t.Fatalf("readyz with Redis killed: %d %s", rep.Status, rep.Body)
		}
		var body map[string]any
		rep.JSON(t, &body)
		if body["ready"] != false || fmt.Sprint(body["problems"]) == "[]" {
			t.Fatalf("readyz body: %s", rep.Body)
		}
		// A submit there: 503 with Retry-After, and nothing of Redis in it.
		rep = f.Call(http.MethodPost, f.R(az).URL()+"/v1/tasks", tokAcme, spec{"type": "x", "regions": []string{az}})
		if rep.Status != http.StatusServiceUnavailable || rep.Header.Get("Retry-After") == "" {
			t.Fatalf("submit with Redis killed: %d %v %s", rep.Status, rep.Header, rep.Body)
		}
		if m := rep.Err(t).Message; strings.Contains(strings.ToLower(m), "redis") || strings.Contains(m, "127.0.0.1") ||
			strings.Contains(m, "dial") || !strings.Contains(m, "ref ") {
			t.Fatalf("the 503 tells the cause: %q", m)
		}
		// The others stay ready; the region is ready again once Redis is back.
		f.Call(http.MethodGet, f.R(aws).URL()+"/readyz", "", nil).Want(t, http.StatusOK)
		f.R(az).Redis.Restart(false)
		fedtest.Eventually(t, 10*time.Second, "ready again", func() bool {
			return f.Call(http.MethodGet, f.R(az).URL()+"/readyz", "", nil).Status == http.StatusOK
		})
	})
}

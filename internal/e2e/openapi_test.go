package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// specSession validates requests and answers against the OpenAPI document
// a real server serves, and records which operations it saw.
type specSession struct {
	t      *testing.T
	fed    *federation
	api    string
	doc    *openapi3.T
	router routers.Router
	seen   map[string][]int // operationId → the statuses answered
}

func newSpecSession(t *testing.T, fed *federation, region string) *specSession {
	api := fed.server(region).api
	code, raw := fed.callAPI(api, "", http.MethodGet, "/v1/openapi.json", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", code, raw)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load the spec: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the spec is not valid OpenAPI: %v", err)
	}
	closeObjects(doc)
	doc.Servers = openapi3.Servers{{URL: api}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &specSession{t: t, fed: fed, api: api, doc: doc, router: router, seen: map[string][]int{}}
}

// closeObjects makes every object schema of doc that lists properties and
// says nothing of others refuse others: an answer with a field the spec
// lacks then fails the session, so a client generated from the spec sees
// every field the server sends.
func closeObjects(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			no := false
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		for _, xs := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
			for _, x := range xs {
				walk(x)
			}
		}
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				if r.Value != nil {
					for _, m := range r.Value.Content {
						walk(m.Schema)
					}
				}
			}
		}
	}
}

// do sends one request with token and checks it against the spec (the
// request must be valid unless badRequest: then the spec must refuse it
// too), that the answer's status is want, and that the answer (status,
// headers, body) is one the spec describes. It returns the body.
func (s *specSession) do(token, method, path string, body any, want int, badRequest bool) []byte {
	s.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			s.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.api+path, bytes.NewReader(raw))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+s.fed.token(token))
	}
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		s.t.Fatalf("%s %s: no operation of the spec: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	verr := openapi3filter.ValidateRequest(ctx, in)
	switch {
	case verr != nil && !badRequest:
		s.t.Errorf("%s %s: the spec refuses the request: %v", method, path, verr)
	case verr == nil && badRequest:
		s.t.Errorf("%s %s %s: the spec accepts a request the server refuses", method, path, raw)
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	resp, err := s.fed.http.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		s.t.Errorf("%s %s: %d %s, want %d", method, path, resp.StatusCode, got, want)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(got)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		s.t.Errorf("%s %s: the answer %d is not what the spec says: %v\n%s", method, path, resp.StatusCode, err, got)
	}
	s.seen[route.Operation.OperationID] = append(s.seen[route.Operation.OperationID], resp.StatusCode)
	return got
}

// ok is do for a valid request that must succeed with want.
func (s *specSession) ok(token, method, path string, body any, want int, v any) {
	s.t.Helper()
	b := s.do(token, method, path, body, want, false)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			s.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// TestOpenAPISession runs a scripted session of every public route, with
// success and error answers, against a real federation with auth on, and
// validates each request and answer against the served spec with
// kin-openapi; then the client oapi-codegen generated from the spec
// round-trips them (internal/e2e/apiclient).
func TestOpenAPISession(t *testing.T) {
	t.Parallel()
	wtok := "wtok-" + randomHex(16)
	fed := newFederation(t, fedOpts{tokens: fmt.Sprintf("- {name: spec-worker, token_sha256: %s, role: worker, tenants: [team-a], pools: [cpu]}", sha256Hex(wtok))})
	fed.tokens["spec-worker"] = wtok
	const home = "us-east-1"
	s := newSpecSession(t, fed, home)

	// Tasks.
	var sub struct{ ID string }
	s.ok(tokSubmitterA, "POST", "/v1/tasks", map[string]any{"type": "noop", "idempotency_key": "spec-1"}, 201, &sub)
	s.ok(tokSubmitterA, "POST", "/v1/tasks", map[string]any{"type": "noop", "idempotency_key": "spec-1"}, 200, nil)
	s.do(tokSubmitterA, "POST", "/v1/tasks", map[string]any{"type": "other", "idempotency_key": "spec-1"}, 409, false)
	s.do(tokSubmitterA, "POST", "/v1/tasks", map[string]any{"type": "noop", "priority": 9}, 400, true)
	s.do(tokSubmitterA, "POST", "/v1/tasks", map[string]any{"type": "noop", "tags": map[string]string{"class": "quantum"}}, 422, false)
	s.do("", "POST", "/v1/tasks", map[string]any{"type": "noop"}, 401, false)
	s.do(tokSubmitterA, "POST", "/v1/tasks", []byte(`{"type":"noop","payload":"`+strings.Repeat("x", 2<<20)+`"}`), 413, false)
	s.ok(tokSubmitterA, "POST", "/v1/tasks/batch", map[string]any{"tasks": []any{map[string]any{"type": "noop"}, map[string]any{"type": "noop", "priority": 1}}}, 200, nil)
	fed.waitState(home, tokSubmitterA, sub.ID, "SUCCESS", 30*time.Second)
	s.ok(tokSubmitterA, "GET", "/v1/tasks/"+sub.ID, nil, 200, nil)
	s.do("spec-worker", "GET", "/v1/tasks/"+sub.ID, nil, 403, false)
	s.do(tokSubmitterB, "GET", "/v1/tasks/"+sub.ID, nil, 404, false)
	s.ok(tokSubmitterA, "GET", "/v1/tasks/"+sub.ID+"/trail", nil, 200, nil)
	s.do(tokSubmitterA, "GET", "/v1/tasks/nope/trail", nil, 404, false)
	s.ok(tokSubmitterA, "GET", "/v1/tasks/"+sub.ID+"/result?wait=5s", nil, 200, nil)
	s.do(tokSubmitterA, "GET", "/v1/tasks/"+sub.ID+"/result?wait=forever", nil, 400, true)
	s.do(tokSubmitterB, "GET", "/v1/tasks/"+sub.ID+"/result", nil, 404, false)
	for _, st := range []string{"PENDING", "HANDED_OFF", "READY", "RUNNING", "SUCCESS", "FAILED", "CANCELED", "TIMEOUT"} {
		s.ok(tokOperator, "GET", "/v1/tasks?limit=5&state="+st, nil, 200, nil)
	}
	s.do(tokOperator, "GET", "/v1/tasks?state=DONE", nil, 400, true)
	s.do(tokSubmitterA, "GET", "/v1/tasks?tenant=team-b", nil, 403, false)
	s.do(tokOperatorA, "POST", "/v1/tasks/"+sub.ID+"/cancel", nil, 409, false)
	var later struct{ ID string }
	s.ok(tokSubmitterA, "POST", "/v1/tasks", map[string]any{"type": "noop", "delay": "1h"}, 201, &later)
	s.ok(tokSubmitterA, "GET", "/v1/tasks/"+later.ID+"/result?wait=50ms", nil, 202, nil)
	s.do(tokSubmitterA, "POST", "/v1/tasks/"+later.ID+"/priority", map[string]any{"priority": 3}, 403, false)
	s.ok(tokOperator, "POST", "/v1/tasks/"+later.ID+"/priority", map[string]any{"priority": 3}, 200, nil)
	s.do(tokOperator, "POST", "/v1/tasks/"+later.ID+"/priority", map[string]any{"priority": 7}, 400, true)
	s.ok(tokOperatorA, "POST", "/v1/tasks/"+later.ID+"/cancel", nil, 200, nil)
	s.do(tokOperator, "POST", "/v1/tasks/"+sub.ID+"/replay", nil, 409, false)
	s.do(tokOperator, "POST", "/v1/tasks/cancel", map[string]any{"state": "RUNNING", "type": "noop"}, 400, true)
	s.ok(tokOperator, "POST", "/v1/tasks/cancel", map[string]any{"type": "never.submitted"}, 200, nil)
	s.ok(tokOperator, "GET", "/v1/dlq?limit=5", nil, 200, nil)
	s.do(tokOperator, "GET", "/v1/dlq?limit=0", nil, 400, true)
	s.ok(tokOperator, "GET", "/v1/cost?group_by=tenant", nil, 200, nil)
	s.do(tokOperator, "GET", "/v1/cost?group_by=colour", nil, 400, false)

	// The federation.
	s.ok(tokSubmitterA, "GET", "/v1/regions", nil, 200, nil)
	s.ok(tokSubmitterA, "GET", "/v1/history?minutes=5", nil, 200, nil)
	s.do(tokSubmitterA, "GET", "/v1/history?minutes=0", nil, 400, true)
	s.do(tokSubmitterA, "GET", "/v1/history?tenant=team-b", nil, 403, false)
	s.ok(tokSubmitterA, "POST", "/v1/placement/explain", map[string]any{"type": "noop"}, 200, nil)
	s.ok(tokSubmitterA, "GET", "/v1/events?region="+home+"&wait=0s", nil, 200, nil)
	s.do(tokSubmitterA, "GET", "/v1/events?wait=forever", nil, 400, false)
	s.ok(tokSubmitterA, "POST", "/v1/stream/tickets", nil, 201, nil)
	s.do("", "GET", "/v1/stream?ticket=nope", nil, 401, false)

	// DAGs.
	var run struct{ ID string }
	s.ok(tokSubmitterA, "POST", "/v1/dags", map[string]any{"name": "spec", "nodes": []any{
		map[string]any{"id": "a", "task": map[string]any{"type": "noop"}},
		map[string]any{"id": "b", "depends_on": []string{"a"}, "task": map[string]any{"type": "noop", "delay": "1h"}}}}, 201, &run)
	s.do(tokSubmitterA, "POST", "/v1/dags", map[string]any{"nodes": []any{}}, 400, false)
	s.ok(tokSubmitterA, "GET", "/v1/dags?limit=5", nil, 200, nil)
	s.ok(tokSubmitterA, "GET", "/v1/dags/"+run.ID, nil, 200, nil)
	s.do(tokSubmitterB, "GET", "/v1/dags/"+run.ID, nil, 404, false)
	s.do(tokSubmitterA, "POST", "/v1/dags/"+run.ID+"/cancel", nil, 403, false)
	s.ok(tokOperatorA, "POST", "/v1/dags/"+run.ID+"/cancel", nil, 200, nil)

	// Batches.
	var bt struct{ ID string }
	s.ok(tokSubmitterA, "POST", "/v1/batches", map[string]any{"name": "spec", "tasks": []any{map[string]any{"type": "noop", "delay": "1h"}},
		"on_complete": map[string]any{"type": "noop", "payload": map[string]string{"to": "ops"}}}, 201, &bt)
	s.do(tokSubmitterA, "POST", "/v1/batches", map[string]any{"tasks": []any{}}, 400, true)
	s.do(tokSubmitterA, "POST", "/v1/batches", map[string]any{"tasks": []any{map[string]any{"type": "noop"}}, "on_complete": map[string]any{"type": "noop", "priority": 9}}, 400, true)
	s.ok(tokSubmitterA, "GET", "/v1/batches?limit=5", nil, 200, nil)
	s.do(tokSubmitterA, "GET", "/v1/batches?limit=0", nil, 400, true)
	s.ok(tokSubmitterA, "GET", "/v1/batches/"+bt.ID, nil, 200, nil)
	s.do(tokSubmitterB, "GET", "/v1/batches/"+bt.ID, nil, 404, false)
	s.do(tokSubmitterA, "POST", "/v1/batches/"+bt.ID+"/cancel", nil, 403, false)
	s.ok(tokOperatorA, "POST", "/v1/batches/"+bt.ID+"/cancel", nil, 200, nil)

	// Schedules.
	sched := map[string]any{"name": "spec-nightly", "cron": "0 0 2 * * *", "task": map[string]any{"type": "noop"}}
	s.do(tokSubmitterA, "POST", "/v1/schedules", sched, 403, false)
	s.ok(tokOperatorA, "POST", "/v1/schedules", sched, 201, nil)
	s.do(tokOperatorA, "POST", "/v1/schedules", sched, 409, false)
	s.do(tokOperatorA, "POST", "/v1/schedules", map[string]any{"name": "x", "cron": "never", "task": map[string]any{"type": "noop"}}, 400, false)
	s.ok(tokOperatorA, "GET", "/v1/schedules", nil, 200, nil)
	s.ok(tokOperatorA, "GET", "/v1/schedules/spec-nightly", nil, 200, nil)
	s.do(tokOperatorA, "GET", "/v1/schedules/no-such", nil, 404, false)
	s.ok(tokOperatorA, "POST", "/v1/schedules/spec-nightly/pause", nil, 200, nil)
	s.ok(tokOperatorA, "POST", "/v1/schedules/spec-nightly/resume", nil, 200, nil)
	var bf struct{ ID string }
	s.ok(tokOperatorA, "POST", "/v1/schedules/spec-nightly/backfill", map[string]any{"from": "2026-01-01", "to": "2026-01-02T12:00:00Z", "max_active": 1}, 201, &bf)
	s.do(tokOperatorA, "POST", "/v1/schedules/spec-nightly/backfill", map[string]any{"from": "2026-01-03", "to": "2026-01-01"}, 400, false)
	s.do(tokOperatorA, "POST", "/v1/schedules/spec-nightly/backfill", map[string]any{"from": "2026-01-01"}, 400, true)
	s.ok(tokOperatorA, "GET", "/v1/schedules/spec-nightly/backfills", nil, 200, nil)
	s.ok(tokOperatorA, "POST", "/v1/schedules/spec-nightly/backfills/"+bf.ID+"/cancel", nil, 200, nil)
	s.do(tokOperatorA, "POST", "/v1/schedules/spec-nightly/backfills/no-such/cancel", nil, 404, false)
	s.ok(tokOperatorA, "POST", "/v1/schedules/spec-nightly/rerun", map[string]any{"period": "2026-01-01T02:00:00Z"}, 201, nil)
	s.do(tokOperatorA, "POST", "/v1/schedules/spec-nightly/rerun", map[string]any{}, 400, true)
	s.ok(tokOperatorA, "GET", "/v1/schedules/spec-nightly/grid?periods=3", nil, 200, nil)
	s.do(tokOperatorA, "GET", "/v1/schedules/spec-nightly/grid?periods=0", nil, 400, true)
	s.ok(tokOperatorA, "DELETE", "/v1/schedules/spec-nightly", nil, 200, nil)

	s.ok("", "GET", "/v1/openapi.json", nil, 200, nil)
	s.do(tokSubmitterA, "POST", "/v1/regions/eu-west-1/drain", nil, 403, false)
	s.ok(tokAdmin, "POST", "/v1/regions/eu-west-1/drain", nil, 200, nil)

	// The worker protocol, with a worker token (its own routes only).
	var reg struct {
		WorkerID string `json:"worker_id"`
	}
	s.ok("spec-worker", "POST", "/v1/workers", map[string]any{"pool": "cpu", "types": []string{"noop"}, "slots": 1}, 201, &reg)
	s.do("spec-worker", "POST", "/v1/workers", map[string]any{"pool": "cpu", "slots": 0}, 400, true)
	s.ok("spec-worker", "POST", "/v1/workers/"+reg.WorkerID+"/claim", map[string]any{"max": 1, "wait_ms": 0}, 200, nil)
	s.ok("spec-worker", "POST", "/v1/workers/"+reg.WorkerID+"/report", map[string]any{}, 200, nil)
	s.ok("spec-worker", "DELETE", "/v1/workers/"+reg.WorkerID, nil, 204, nil)

	var missing []string
	for _, p := range s.doc.Paths.InMatchingOrder() {
		for _, op := range s.doc.Paths.Value(p).Operations() {
			if _, ok := s.seen[op.OperationID]; !ok && op.OperationID != "streamEvents" {
				missing = append(missing, op.OperationID)
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("the session never called %v", missing)
	}
	t.Log(fmt.Sprint(s.seen))
	t.Run("the client generated from the spec", func(t *testing.T) { clientRoundTrip(t, fed, home) })
}

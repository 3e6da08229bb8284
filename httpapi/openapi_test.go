package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// specOps reads an OpenAPI document's operations as "METHOD /path", with
// their operationIds.
func specOps(t *testing.T, name string, raw []byte) (ops []string, ids map[string]string) {
	t.Helper()
	var doc struct {
		OpenAPI string                                             `json:"openapi"`
		Paths   map[string]map[string]struct{ OperationID string } `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("%s: openapi %q", name, doc.OpenAPI)
	}
	ids = map[string]string{}
	for path, byMethod := range doc.Paths {
		for method, op := range byMethod {
			switch method {
			case "get", "post", "put", "patch", "delete":
				ops = append(ops, strings.ToUpper(method)+" "+path)
				ids[strings.ToUpper(method)+" "+path] = op.OperationID
			}
		}
	}
	slices.Sort(ops)
	return ops, ids
}

// outsideSpec are the patterns the API serves that neither OpenAPI
// document describes: they are no part of the /v1 API a client is
// generated for.
var outsideSpec = []string{
	"GET /metrics",         // Prometheus' text format
	"GET /healthz",         // liveness, plain text
	"GET /readyz",          // readiness, for load balancers and probes
	"GET /debug/pprof/",    // Go's profiles, with profiling on
	"GET /{$}", "GET /ui/", // the dashboard's files
}

// TestOpenAPIMatchesRoutes: every pattern the API serves is in
// openapi.json (a public /v1 route, with its method and an operationId),
// in openapi-internal.json (a /v1/internal/ route, and only there) or in
// outsideSpec; every operation of the documents is served; both documents
// are served as they are in the repository.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	a := New(nil, Config{Profiling: true})
	var public, internal []string
	for _, r := range a.routes {
		switch {
		case strings.Contains(r, " /v1/internal/") || r == "GET /v1/openapi-internal.json":
			internal = append(internal, r)
		case strings.Contains(r, " /v1/"):
			public = append(public, r)
		case !slices.Contains(outsideSpec, r):
			t.Errorf("route %s is in no OpenAPI document nor in outsideSpec", r)
		}
	}
	for _, r := range outsideSpec {
		if !slices.Contains(a.routes, r) {
			t.Errorf("outsideSpec has %s, which the API does not serve", r)
		}
	}
	for _, c := range []struct {
		name   string
		raw    []byte
		routed []string
	}{{"openapi.json", openAPI, public}, {"openapi-internal.json", openAPIInternal, internal}} {
		ops, ids := specOps(t, c.name, c.raw)
		for _, r := range c.routed {
			if !slices.Contains(ops, r) {
				t.Errorf("route %s is not in %s", r, c.name)
			}
		}
		seen := map[string]string{}
		for _, op := range ops {
			if !slices.Contains(c.routed, op) {
				t.Errorf("%s has %s, which no route of its kind serves", c.name, op)
			}
			id := ids[op]
			if id == "" {
				t.Errorf("%s: %s has no operationId", c.name, op)
			} else if other, dup := seen[id]; dup {
				t.Errorf("%s: operationId %s names %s and %s", c.name, id, other, op)
			}
			seen[id] = op
		}
	}
	for path, doc := range map[string][]byte{"/v1/openapi.json": openAPI, "/v1/openapi-internal.json": openAPIInternal} {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != 200 || rec.Body.String() != string(doc) || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Header())
		}
	}
}

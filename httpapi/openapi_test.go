package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: every /v1 route the API registers is in
// openapi.json with its method, and every operation there is registered;
// the document is served as it is in the repository.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	a := New(nil, Config{})
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var spec, routed []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete":
				spec = append(spec, strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, r := range a.routes {
		if strings.Contains(r, " /v1/") {
			routed = append(routed, r)
		}
	}
	slices.Sort(spec)
	slices.Sort(routed)
	for _, r := range routed {
		if !slices.Contains(spec, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, s := range spec {
		if !slices.Contains(routed, s) {
			t.Errorf("openapi.json has %s, which no route serves", s)
		}
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
	if rec.Code != 200 || rec.Body.String() != string(openAPI) || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %s", rec.Code, rec.Header())
	}
}

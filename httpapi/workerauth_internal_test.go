package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
)

// TestWorkerTokenOnlyServesTheProtocol: a worker token is 403 on every
// route but the worker protocol's (tasks, admin, metrics, stream tickets),
// and its principal carries its scope.
func TestWorkerTokenOnlyServesTheProtocol(t *testing.T) {
	auth := &Auth{Enabled: true, Tokens: []Token{
		{Name: "acme-gpu", SHA256: HashToken("worker-token"), Role: RoleWorker,
			Tenants: []string{"acme"}, Pools: []string{"acme-gpu"}, Types: []string{"resize"}},
	}}
	if p, ok := auth.Authenticate(bearer(httptest.NewRequest(http.MethodGet, "/", nil), "worker-token")); !ok ||
		p.Role != RoleWorker || p.Worker == nil || p.Worker.Pools[0] != "acme-gpu" || p.Worker.Tenants[0] != "acme" || p.Tenant != "" {
		t.Fatalf("principal of a worker token: %+v %v", p, ok)
	}
	a := New(nil, Config{Auth: auth})
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/tasks"}, {"GET", "/v1/tasks"}, {"GET", "/v1/tasks/us-east-1.x"},
		{"POST", "/v1/tasks/us-east-1.x/cancel"}, {"POST", "/v1/regions/r1/drain"}, {"GET", "/v1/regions"},
		{"POST", "/v1/stream/tickets"}, {"GET", "/v1/events"}, {"GET", "/v1/dlq"}, {"POST", "/v1/schedules"},
		{"GET", "/metrics"},
	} {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, bearer(httptest.NewRequest(c.method, c.path, strings.NewReader("{}")), "worker-token"))
		var body apiv1.ErrorBody
		if rec.Code != http.StatusForbidden || json.Unmarshal(rec.Body.Bytes(), &body) != nil ||
			body.Error.Code != apiv1.CodeForbidden || body.Error.Field != "Authorization" {
			t.Errorf("%s %s with a worker token: %d %s", c.method, c.path, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, bearer(httptest.NewRequest("GET", "/healthz", nil), "worker-token"))
	if rec.Code != http.StatusOK {
		t.Errorf("/healthz with a worker token: %d", rec.Code)
	}
}

func bearer(r *http.Request, tok string) *http.Request {
	r.Header.Set("Authorization", "Bearer "+tok)
	r.RemoteAddr = "192.0.2.1:1234"
	return r
}

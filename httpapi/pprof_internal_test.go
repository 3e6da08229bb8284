package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProfilesNeedAnAdminOfEveryTenant: /debug/pprof/ is served only with
// http_server.profiling on, and then only to an admin token of every
// tenant: a tenant's admin, an operator and a worker are 403, no token 401.
func TestProfilesNeedAnAdminOfEveryTenant(t *testing.T) {
	auth := &Auth{Enabled: true, Tokens: []Token{
		{Name: "root", SHA256: HashToken("root"), Role: RoleAdmin},
		{Name: "acme-admin", SHA256: HashToken("acme-admin"), Role: RoleAdmin, Tenant: "acme"},
		{Name: "ops", SHA256: HashToken("ops"), Role: RoleOperator},
		{Name: "w", SHA256: HashToken("w"), Role: RoleWorker, Tenants: []string{"acme"}, Pools: []string{"cpu"}},
	}}
	get := func(a *API, path, tok string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if tok != "" {
			r = bearer(r, tok)
		}
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, r)
		return rec
	}
	off := New(nil, Config{Auth: auth, PublicDetails: true})
	if rec := get(off, "/debug/pprof/", "root"); rec.Code != http.StatusNotFound {
		t.Errorf("profiling off: %d %s", rec.Code, rec.Body)
	}
	on := New(nil, Config{Auth: auth, PublicDetails: true, Profiling: true})
	for _, c := range []struct {
		tok  string
		code int
	}{{"", 401}, {"acme-admin", 403}, {"ops", 403}, {"w", 403}, {"root", 200}} {
		if rec := get(on, "/debug/pprof/", c.tok); rec.Code != c.code {
			t.Errorf("token %q: %d, want %d (%s)", c.tok, rec.Code, c.code, rec.Body)
		}
	}
	if rec := get(on, "/debug/pprof/goroutine?debug=1", "root"); rec.Code != 200 || !strings.Contains(rec.Body.String(), "goroutine profile") {
		t.Errorf("goroutine profile: %d %.200s", rec.Code, rec.Body)
	}
	if rec := get(on, "/debug/pprof/cmdline", "root"); rec.Code != 200 {
		t.Errorf("cmdline: %d", rec.Code)
	}
}

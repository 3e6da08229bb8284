package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
)

// TestMethodNotAllowed: every path the API serves answers a method it
// does not serve with 405, an Allow header naming the methods it does, and
// the JSON error body; a path it does not serve is 404.
func TestMethodNotAllowed(t *testing.T) {
	a := New(nil, Config{})
	routes := append(slices.Clone(a.routes), "GET /ui/app.js")
	byPath := map[string][]string{}
	for _, r := range routes {
		m, path, _ := strings.Cut(r, " ")
		byPath[path] = append(byPath[path], m)
	}
	// served reports whether another route's template takes path with
	// method m (GET /v1/tasks/{id} takes GET /v1/tasks/batch).
	served := func(path, m string) bool {
		seg := strings.Split(path, "/")
		for _, r := range routes {
			rm, tpl, _ := strings.Cut(r, " ")
			ts := strings.Split(tpl, "/")
			if rm != m || len(ts) != len(seg) || tpl == path {
				continue
			}
			ok := true
			for i := range ts {
				if ts[i] != seg[i] && !strings.HasPrefix(ts[i], "{") {
					ok = false
				}
			}
			if ok {
				return true
			}
		}
		return false
	}
	fill := strings.NewReplacer("{id}", "0000000000000000.0.aws-use1", "{name}", "nightly", "{region}", "aws-use1", "{$}", "")
	checked := 0
	for tpl, methods := range byPath {
		path := fill.Replace(tpl)
		want := slices.Clone(methods)
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			if !slices.Contains(want, m) && served(tpl, m) {
				want = append(want, m)
			}
		}
		if slices.Contains(want, http.MethodGet) {
			want = append(want, http.MethodHead)
		}
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			if slices.Contains(want, m) {
				continue
			}
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, httptest.NewRequest(m, path, nil))
			var body apiv1.ErrorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			allow := strings.Split(rec.Header().Get("Allow"), ", ")
			slices.Sort(allow)
			slices.Sort(want)
			if rec.Code != http.StatusMethodNotAllowed || body.Error.Code != apiv1.CodeMethodNotAllowed || body.Error.Message == "" ||
				!slices.Equal(allow, want) || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("%s %s: %d Allow %q %s; want 405 method_not_allowed, Allow %v", m, path, rec.Code, rec.Header().Get("Allow"), rec.Body, want)
			}
			checked++
		}
	}
	if checked < 2*len(byPath) {
		t.Errorf("only %d method checks over %d paths", checked, len(byPath))
	}
	for _, r := range []struct{ method, path string }{{http.MethodGet, "/v1/nope"}, {http.MethodDelete, "/v1/tasks/x/y"}, {http.MethodPost, "/v2/tasks"}} {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(r.method, r.path, nil))
		if rec.Code != http.StatusNotFound || rec.Header().Get("Allow") != "" || !strings.Contains(rec.Body.String(), apiv1.CodeNotFound) {
			t.Errorf("%s %s: %d %q %s, want 404", r.method, r.path, rec.Code, rec.Header().Get("Allow"), rec.Body)
		}
	}
}

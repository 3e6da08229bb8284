package httpapi

import (
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"
)

// profiles serves net/http/pprof's index and profiles under /debug/pprof/
// to an admin token of every tenant (tenant ""), whatever PublicDetails
// says: a profile names the server's code paths and a goroutine dump
// the requests in flight. With auth off it serves anyone.
func profiles(auth *Auth) http.Handler {
	named := map[string]http.HandlerFunc{
		"cmdline": pprof.Cmdline,
		"profile": pprof.Profile,
		"symbol":  pprof.Symbol,
		"trace":   pprof.Trace,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !admitted(w, r, auth, func(p Principal) bool { return p.Tenant == "" && p.Role == RoleAdmin },
			"profiles need an admin token of every tenant (tenant \"\")") {
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
		if sec, err := strconv.Atoi(r.URL.Query().Get("seconds")); err == nil && sec > 0 && (name == "profile" || name == "trace") {
			// The profile runs for sec seconds before it writes: its write
			// deadline moves with it (http.Server's write_timeout still
			// bounds sec: pprof refuses a longer one, 400).
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Duration(sec)*time.Second + 5*time.Second))
		}
		if h, ok := named[name]; ok {
			h(w, r)
			return
		}
		pprof.Index(w, r) // the index, and every runtime profile by name
	})
}

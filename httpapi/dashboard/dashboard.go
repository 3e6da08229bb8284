package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

// The dashboard: one HTML page, a script and a style sheet, no build step.
// It calls the same /v1 API as the CLI with a token the operator pastes
// into it, kept in the tab's session storage (never in a URL or a cookie,
// so no request is authenticated by the browser on its own). The Content
// Security Policy allows only these files' own script and style: a task
// type or payload that slipped past the script's escaping still runs
// nothing.
//
//go:embed ui
var uiFiles embed.FS

const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Mux is where Register registers: an *http.ServeMux, or the API's
// registrar that also notes each pattern.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Register serves / and /ui/ on mux (no authentication: the files hold no
// data; every figure comes from the API with the operator's token).
func Register(mux Mux) {
	sub, _ := fs.Sub(uiFiles, "ui")
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	secure := func(h http.Handler) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Security-Policy", dashboardCSP)
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Referrer-Policy", "no-referrer")
			w.Header().Set("Cache-Control", "no-cache")
			h.ServeHTTP(w, r)
		}
	}
	mux.Handle("GET /{$}", secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, sub, "index.html")
	})))
	mux.Handle("GET /ui/", secure(files))
}

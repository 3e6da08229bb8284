package handlers_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

func TestHTTP(t *testing.T) {
	var boomCalls atomic.Int32
	headers := make(chan http.Header, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/ok", func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "got: "+string(b))
	})
	mux.HandleFunc("POST /hooks/bad", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "missing field invoice", http.StatusBadRequest)
	})
	mux.HandleFunc("POST /hooks/boom", func(w http.ResponseWriter, r *http.Request) {
		boomCalls.Add(1)
		http.Error(w, "database down", http.StatusInternalServerError)
	})
	mux.HandleFunc("POST /hooks/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/admin/delete-everything", http.StatusTemporaryRedirect)
	})
	// Redirects whose raw Location climbs out of /hooks/.
	for name, loc := range map[string]string{"dots": "/hooks/../admin/x", "encoded": "/hooks/%2e%2e/admin/x", "slash": "/hooks/..%2fadmin/x"} {
		mux.HandleFunc("POST /hooks/away-"+name, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusTemporaryRedirect)
		})
	}
	mux.HandleFunc("POST /hooks/around", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/hooks/x/../ok")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	var adminCalls atomic.Int32
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		adminCalls.Add(1)
		_, _ = io.WriteString(w, "admin reached")
	})
	// Go's mux would redirect /hooks/../admin itself; a server that does
	// not clean paths is what the handler must not rely on.
	raw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.EscapedPath(), "..") || strings.Contains(strings.ToLower(r.URL.EscapedPath()), "%2e") {
			adminCalls.Add(1)
			http.Error(w, "unclean path reached the server: "+r.URL.EscapedPath(), http.StatusTeapot)
			return
		}
		mux.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(raw)
	defer srv.Close()

	post, err := handlers.HTTP(handlers.HTTPOptions{Allow: []string{srv.URL + "/hooks/"}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := wt.New(t)
	e.Leader()
	w := e.Worker(worker.Options{Concurrency: 4})
	w.Handle("http", post)
	e.Run(w)
	submit := func(url string, mod ...func(*task.Spec)) string {
		return e.SubmitOne("http", map[string]any{"url": url, "body": map[string]int{"n": 1}}, mod...)
	}

	t.Run("200 succeeds with the response", func(t *testing.T) {
		id := submit(srv.URL + "/hooks/ok")
		tk := e.WaitState(id, task.Success, 5*time.Second)
		if tk.Result != `got: {"n":1}` {
			t.Fatalf("result %q", tk.Result)
		}
		h := <-headers
		if h.Get("Idempotency-Key") != id || h.Get("Content-Type") != "application/json" ||
			!strings.HasPrefix(h.Get("Traceparent"), "00-"+tk.TraceID+"-") {
			t.Fatalf("headers %v", h)
		}
	})
	t.Run("400 is not retried", func(t *testing.T) {
		tk := e.WaitState(submit(srv.URL+"/hooks/bad"), task.Failed, 5*time.Second)
		if tk.Reason != task.ReasonNonRetryable || tk.Attempts != 1 || !strings.Contains(tk.LastError, "400 Bad Request: missing field invoice") {
			t.Fatalf("got %s after %d attempts: %q", tk.Reason, tk.Attempts, tk.LastError)
		}
	})
	t.Run("500 is retried", func(t *testing.T) {
		id := submit(srv.URL+"/hooks/boom", wt.Retries(2), wt.FastRetry)
		tk := e.WaitState(id, task.Failed, 5*time.Second)
		if tk.Reason != task.ReasonRetriesExhausted || tk.Attempts != 3 || boomCalls.Load() != 3 ||
			!strings.Contains(tk.LastError, "500 Internal Server Error: database down") {
			t.Fatalf("got %s after %d attempts (%d calls): %q", tk.Reason, tk.Attempts, boomCalls.Load(), tk.LastError)
		}
	})
	t.Run("a redirect is cleaned and checked like the payload's URL", func(t *testing.T) {
		tk := e.WaitState(submit(srv.URL+"/hooks/around"), task.Success, 5*time.Second)
		if tk.Result != `got: {"n":1}` {
			t.Fatalf("result %q", tk.Result)
		}
		<-headers
	})
	for _, c := range []struct{ name, url, want string }{
		{"prefix not allowed", srv.URL + "/admin/x", "not under an allowed prefix"},
		{"prefix without its boundary", srv.URL + "/hooks", "not under an allowed prefix"},
		{"another host", "http://example.invalid/hooks/ok", "not under an allowed prefix"},
		{"dot segments", srv.URL + "/hooks/../admin/x", "not under an allowed prefix: " + srv.URL + "/admin/x"},
		{"encoded dots", srv.URL + "/hooks/%2e%2e/admin/x", "not under an allowed prefix: " + srv.URL + "/admin/x"},
		{"encoded slash", srv.URL + "/hooks/..%2fadmin/x", "not under an allowed prefix: " + srv.URL + "/admin/x"},
		{"double encoding", srv.URL + "/hooks/%252e%252e/admin/x", "servers read in different ways"},
		{"userinfo", strings.Replace(srv.URL, "://", "://u:p@", 1) + "/hooks/ok", "URLs with a user or password are refused"},
		{"redirect out of the allowlist", srv.URL + "/hooks/away", "redirect to a URL outside the allowlist"},
		{"redirect with dot segments", srv.URL + "/hooks/away-dots", "redirect to a URL outside the allowlist"},
		{"redirect with encoded dots", srv.URL + "/hooks/away-encoded", "redirect to a URL outside the allowlist"},
		{"redirect with an encoded slash", srv.URL + "/hooks/away-slash", "redirect to a URL outside the allowlist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk := e.WaitState(submit(c.url), task.Failed, 5*time.Second)
			if tk.Reason != task.ReasonNonRetryable || !strings.Contains(tk.LastError, c.want) {
				t.Fatalf("got %s: %q, want NON_RETRYABLE with %q", tk.Reason, tk.LastError, c.want)
			}
		})
	}
	if n := adminCalls.Load(); n != 0 {
		t.Fatalf("%d requests reached /admin or an unclean path", n)
	}
}

func TestHTTPClientTimeoutIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	post, err := handlers.HTTP(handlers.HTTPOptions{Allow: []string{srv.URL}, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = post(context.Background(), &worker.Task{ID: "t1", Type: "http", Payload: []byte(`{"url":"` + srv.URL + `/x"}`)})
	if err == nil || errors.Is(err, worker.ErrNonRetryable) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("got %v, want a retryable timeout", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestHTTPOptionsAreChecked(t *testing.T) {
	for _, allow := range [][]string{nil, {"ftp://x/"}, {"/relative"}, {"https://x.example.com/a/../b/"}, {"https://x.example.com/?q"}} {
		if _, err := handlers.HTTP(handlers.HTTPOptions{Allow: allow}); err == nil {
			t.Fatalf("Allow %q accepted", allow)
		}
	}
}

// DenyPrivate checks the address each connection goes to, after DNS: a
// name that resolves to loopback is refused for good; an address literal
// is refused when the handler is made.
func TestHTTPDenyPrivate(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.WriteString(w, "reached")
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	if _, err := handlers.HTTP(handlers.HTTPOptions{Allow: []string{srv.URL + "/hooks/"}, DenyPrivate: true}); err == nil ||
		!strings.Contains(err.Error(), "names a loopback address, which deny_private refuses") {
		t.Fatalf("a loopback literal prefix with DenyPrivate: %v", err)
	}
	payload := []byte(`{"url":"http://localhost:` + port + `/hooks/x"}`)
	for _, deny := range []bool{true, false} {
		post, err := handlers.HTTP(handlers.HTTPOptions{Allow: []string{"http://localhost:" + port + "/hooks/"}, DenyPrivate: deny, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		tk := &worker.Task{ID: "t1", Type: "http", Payload: payload}
		err = post(context.Background(), tk)
		switch {
		case deny && (!errors.Is(err, worker.ErrNonRetryable) || !strings.Contains(err.Error(), "is a loopback address") || calls.Load() != 0):
			t.Fatalf("DenyPrivate: %v after %d calls, want a NonRetryable refusal of a loopback address and no call", err, calls.Load())
		case !deny && (err != nil || tk.Result() != "reached"):
			t.Fatalf("without DenyPrivate: %v, result %q", err, tk.Result())
		}
	}
}

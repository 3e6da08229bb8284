package server

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// unwrapper is how httpapi's status recorder wraps the writer it gets.
type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }
func (u unwrapper) Flush()                      { u.ResponseWriter.(http.Flusher).Flush() }

// serveWithWriteTimeout serves h behind withWriteDeadline on a real
// http.Server with the given write timeout, as ax server does.
func serveWithWriteTimeout(t *testing.T, d time.Duration, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: withWriteDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(unwrapper{w}, r)
	}), d), WriteTimeout: d}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// A handler stuck on a frozen dependency (it returns a while after its
// context ends) gets the caller a whole 503 with Retry-After before the
// write timeout, and its context ends; without it the connection closed
// with no answer.
func TestWriteDeadlineAnswers503ForAStuckHandler(t *testing.T) {
	ended := make(chan error, 1)
	base := serveWithWriteTimeout(t, 600*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "1")
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
			// as a call to a frozen Redis does: it returns only at its
			// client's read timeout
			time.Sleep(time.Second)
		case <-time.After(5 * time.Second):
			ended <- nil
		}
		w.WriteHeader(http.StatusInternalServerError) // too late: not sent
	})
	start := time.Now()
	resp, err := http.Get(base + "/v1/tasks/x/trail")
	if err != nil {
		t.Fatalf("no answer before the write timeout: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb apiv1.ErrorBody
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" ||
		json.Unmarshal(body, &eb) != nil || eb.Error.Code != apiv1.CodeUnavailable || eb.Error.RetryAfterSeconds != 5 ||
		resp.Header.Get("X-Handler") != "" {
		t.Fatalf("%d %v %s, want 503 unavailable with Retry-After 5 and none of the handler's headers", resp.StatusCode, resp.Header, body)
	}
	if took := time.Since(start); took > 600*time.Millisecond {
		t.Fatalf("answered after %v, past the write timeout", took)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the handler's context did not end")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the handler's context did not end")
	}
}

// A handler that moves its write deadline (a long-poll, an event stream)
// keeps its request; one that answers in time is answered as it wrote.
func TestWriteDeadlineMovesWithTheHandlers(t *testing.T) {
	const d = 400 * time.Millisecond
	base := serveWithWriteTimeout(t, d, func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		switch r.URL.Path {
		case "/poll":
			_ = rc.SetWriteDeadline(time.Now().Add(3 * d))
			select {
			case <-r.Context().Done():
				return
			case <-time.After(2 * d):
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"events":[]}`))
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 6 {
				_ = rc.SetWriteDeadline(time.Now().Add(d))
				if _, err := io.WriteString(w, ": beat\n"); err != nil {
					return
				}
				_ = rc.Flush()
				if i < 5 {
					time.Sleep(d / 3)
				}
			}
		case "/quick":
			w.Header().Set("X-Handler", "1")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("made"))
		}
	})
	for _, c := range []struct{ path, want, header string }{
		{"/poll", `{"events":[]}`, ""},
		{"/stream", strings.Repeat(": beat\n", 6), ""},
		{"/quick", "made", "1"},
	} {
		resp, err := http.Get(base + c.path)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != c.want || resp.StatusCode >= 300 || resp.Header.Get("X-Handler") != c.header {
			t.Errorf("%s: %d %q %v (X-Handler %q), want %q", c.path, resp.StatusCode, body, err, resp.Header.Get("X-Handler"), c.want)
		}
	}
}

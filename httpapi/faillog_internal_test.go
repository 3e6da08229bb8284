package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/federation/peer"
	"github.com/redis/go-redis/v9"
)

// levels is a slog handler counting records by level, and keeping the
// WARN records' "suppressed" attribute.
type levels struct {
	mu         sync.Mutex
	n          map[slog.Level]int
	suppressed []int64
}

func (h *levels) Enabled(context.Context, slog.Level) bool { return true }
func (h *levels) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Level]++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" && r.Level == slog.LevelWarn {
			h.suppressed = append(h.suppressed, a.Value.Int64())
		}
		return true
	})
	return nil
}
func (h *levels) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levels) WithGroup(string) slog.Handler      { return h }

func (h *levels) counts() (debug, warn, errs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[slog.LevelDebug], h.n[slog.LevelWarn], h.n[slog.LevelError]
}

// A busy outage does not flood the log: of 100 requests answered 503
// (Redis unreachable: a real client's error) within 10 s, one is logged at
// WARN and the other 99 at DEBUG; the next WARN, 10 s on, counts the 99 it
// did not write. A 502 (another cause) has its own WARN. Every 500 (a bug)
// is an ERROR, also amid the outage.
func TestOutageFailuresAreLoggedOncePer10s(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	outage := rdb.Get(t.Context(), "k").Err()
	if outage == nil {
		t.Fatal("a Redis client to a closed port answered")
	}
	h := &levels{n: map[slog.Level]int{}}
	a := New(nil, Config{Logger: slog.New(h)})
	clock := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	a.fails.now = func() time.Time { return clock }
	a.route("GET /test/{kind}", RoleSubmitter, func(_ http.ResponseWriter, r *http.Request, _ Principal) error {
		switch r.PathValue("kind") {
		case "outage":
			return fmt.Errorf("get: %w", outage)
		case "peer":
			return fmt.Errorf("forward: %w", &peer.Error{Status: 502}) // no error body
		}
		return errors.New("a bug")
	})
	call := func(kind string, want int) {
		t.Helper()
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/test/"+kind, nil))
		if rec.Code != want {
			t.Fatalf("GET /test/%s: %d %s, want %d", kind, rec.Code, rec.Body, want)
		}
	}
	for i := range 100 {
		call("outage", 503)
		if i%40 == 0 {
			call("bug", 500)
		}
		if i%50 == 0 {
			call("peer", 502)
		}
		clock = clock.Add(90 * time.Millisecond) // 9 s in all
	}
	if d, w, e := h.counts(); d != 99+1 || w != 1+1 || e != 3 {
		t.Fatalf("100 answers 503, 2 answers 502 and 3 answers 500 within 10 s: %d DEBUG, %d WARN, %d ERROR records; want 100, 2, 3", d, w, e)
	}
	clock = clock.Add(time.Second)
	call("outage", 503)
	call("bug", 500)
	if d, w, e := h.counts(); d != 100 || w != 3 || e != 4 || h.suppressed[2] != 99 {
		t.Fatalf("10 s on, one more 503 and 500: %d DEBUG, %d WARN (suppressed %v), %d ERROR; want 100, 3 (the third counting 99), 4", d, w, h.suppressed, e)
	}
}

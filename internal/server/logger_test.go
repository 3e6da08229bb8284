package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/config"
)

func TestLogTextOnlyOnATerminalUnlessAsked(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		format string
		want   bool
	}{{"", false}, {"text", true}, {"json", false}} {
		if got := logText(c.format, f); got != c.want {
			t.Errorf("AX_LOG_FORMAT=%q on a file: text=%v", c.format, got)
		}
	}
}

func TestLogDurationsAreReadable(t *testing.T) {
	var w bytes.Buffer
	logTo(&w, false, slog.LevelInfo).Info("x", "took", 1500*time.Millisecond)
	if !strings.Contains(w.String(), `"took":"1.5s"`) {
		t.Fatalf("JSON log: %s", w.String())
	}
}

// The Redis client's own messages go to ax's log as JSON lines (they were
// plain "redis: <date> pool.go:…" lines on stderr): a client that cannot
// dial its Redis says so at WARN, from component redis.
func TestRedisClientLogsThroughAx(t *testing.T) {
	var buf syncBuffer
	useRedisLog(logTo(&buf, false, slog.LevelInfo))
	t.Cleanup(func() { useRedisLog(logTo(io.Discard, false, slog.LevelInfo)) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	rdb, err := redisClient(config.Redis{Addr: addr}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err == nil {
		t.Fatal("a ping of a closed port answered")
	}
	// Every line is JSON; one is this client's (other tests' clients may
	// log meanwhile: the logger is process-wide).
	found := false
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] != "WARN" || rec["component"] != "redis" {
			t.Fatalf("%q (%v), want JSON lines at WARN from component redis", line, err)
		}
		found = found || strings.HasPrefix(fmt.Sprint(rec["msg"]), "connection pool: failed to dial")
	}
	if !found {
		t.Fatalf("%q: no line says the pool failed to dial", buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

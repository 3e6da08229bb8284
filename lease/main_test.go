package lease

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/ax-sched/ax/internal/testenv"
)

// testTTL is etcd's minimum lease TTL with the embedded server's default
// election timeout (1.5 × 1s, rounded up): asking for less gets this anyway.
const testTTL = 2 * time.Second

// Every goroutine this package starts, and every client and server a test
// starts, must be gone: no goleak ignore is needed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// checkLeaks verifies, after every other cleanup of t (it registers first,
// so it runs last), that the test left no goroutine behind.
func checkLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

func testOptions(extra ...Option) []Option {
	return append([]Option{WithTTL(testTTL), WithCallTimeout(time.Second), WithLogger(slog.New(slog.DiscardHandler))}, extra...)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a client of endpoint (a proxy), closed by t.Cleanup.
func newClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newSession(t *testing.T, ctx context.Context, c *clientv3.Client) *Session {
	t.Helper()
	s, err := NewSession(ctx, c, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Close(cctx)
	})
	return s
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// closedWithin reports how long ch took to close, failing after within.
func closedWithin(t *testing.T, ch <-chan struct{}, within time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("not within %v: %s", within, what)
		return 0
	}
}

// logRecorder keeps log messages, to check which path the code took.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) saw(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, substr) {
			return true
		}
	}
	return false
}

var _ slog.Handler = (*logRecorder)(nil)

func TestProxyPassesTraffic(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	p := testenv.StartProxy(t, e.Endpoint())
	c := newClient(t, p.URL())
	ctx := testCtx(t)
	if _, err := c.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := c.Get(cctx, "/k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("frozen proxy: got %v, want deadline exceeded", err)
	}
	p.Thaw()
	if _, err := c.Get(ctx, "/k"); err != nil {
		t.Fatal(err)
	}
}

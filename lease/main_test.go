package lease

import (
	"context"
	"errors"
	"log/slog"
	"net"
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

// proxy is a TCP proxy in front of etcd that can stall (stop moving bytes
// while keeping connections open, like a frozen host or a black-holed
// route) or go down (drop every connection and refuse new ones).
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	down   bool
	closed bool
	conns  map[net.Conn]struct{}
}

func startProxy(t *testing.T, endpoint string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: strings.TrimPrefix(endpoint, "http://"), conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		p.mu.Lock()
		if err != nil || p.down || p.closed {
			p.mu.Unlock()
			_ = in.Close()
			if out != nil {
				_ = out.Close()
			}
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.flowing() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// flowing waits while the proxy is frozen; false once it is closed.
func (p *proxy) flowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.frozen && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *proxy) set(f func()) {
	p.mu.Lock()
	f()
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *proxy) Freeze() { p.set(func() { p.frozen = true }) }
func (p *proxy) Thaw()   { p.set(func() { p.frozen = false }) }

// Down drops every connection and refuses new ones until Up.
func (p *proxy) Down() {
	p.set(func() {
		p.down = true
		for c := range p.conns {
			_ = c.Close()
			delete(p.conns, c)
		}
	})
}

func (p *proxy) Up() { p.set(func() { p.down = false }) }

func (p *proxy) close() {
	p.set(func() {
		p.closed = true
		for c := range p.conns {
			_ = c.Close()
		}
	})
	_ = p.ln.Close()
	p.wg.Wait()
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
	p := startProxy(t, e.Endpoint())
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

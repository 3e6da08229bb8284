package testenv

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/internal/redisproc"
)

// RedisOptions tune a test Redis.
type RedisOptions struct {
	// AOFAlways turns on the append-only file with appendfsync always, so a
	// restart keeps every acknowledged write.
	AOFAlways bool
	// Password, when set, is required of every client (requirepass);
	// Client and Flush use it.
	Password string
	// Cluster starts the server with cluster-enabled yes.
	Cluster bool
	// Sentinel starts a Sentinel (redis-server --sentinel); Extra holds its
	// sentinel directives.
	Sentinel bool
	// Extra are additional config directives ("name value").
	Extra []string
	// TLS, when set, makes the server listen with TLS too, on a port of its
	// own (TLSAddr; clients must present a certificate of the CA), and
	// replicate (and, with Cluster, talk on the cluster bus) over TLS. The
	// plain port stays, for the test's own clients and probes.
	TLS *Certs
}

// Redis is a redis-server child process owned by a test (an
// internal/redisproc server that is stopped with t.Cleanup and can be
// killed, paused and restarted on the same port and data).
type Redis struct {
	t       testing.TB
	dir     string
	port    int
	tlsPort int // 0: no TLS
	opts    RedisOptions

	mu  sync.Mutex
	srv *redisproc.Server // nil while stopped
}

// FreePort returns a TCP port that was free a moment ago on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartRedis starts a redis-server on a free port in a temp dir. It is
// stopped with t.Cleanup.
func StartRedis(t testing.TB, opts ...RedisOptions) *Redis {
	t.Helper()
	r := &Redis{t: t, dir: t.TempDir()}
	if len(opts) > 0 {
		r.opts = opts[0]
	}
	if r.opts.TLS != nil {
		r.tlsPort = FreePort(t)
	}
	srv, err := r.start(0)
	if errors.Is(err, redisproc.ErrNotFound) {
		t.Fatalf("testenv: %v (run `make deps` or `make test`, which install it)", err)
	}
	if err != nil {
		t.Fatalf("testenv: start redis: %v", err)
	}
	r.port = srv.Port()
	r.srv = srv
	t.Cleanup(r.Stop)
	return r
}

// start starts the server on port (0: a free one).
func (r *Redis) start(port int) (*redisproc.Server, error) {
	opts := []redisproc.Option{redisproc.WithDir(r.dir), redisproc.WithConfig("loglevel warning"),
		redisproc.WithStopGrace(5 * time.Second)}
	if port != 0 {
		opts = append(opts, redisproc.WithPort(port))
	}
	if r.opts.AOFAlways {
		opts = append(opts, redisproc.WithAOF("always"))
	}
	if r.opts.Password != "" {
		opts = append(opts, redisproc.WithPassword(r.opts.Password))
	}
	if r.opts.Cluster {
		opts = append(opts, redisproc.WithCluster())
	}
	if r.opts.Sentinel {
		opts = append(opts, redisproc.WithSentinel())
	}
	if c := r.opts.TLS; c != nil {
		opts = append(opts, redisproc.WithConfig(append(c.RedisTLS(r.tlsPort), "tls-replication yes")...))
		if r.opts.Cluster {
			opts = append(opts, redisproc.WithConfig("tls-cluster yes"))
		}
	}
	opts = append(opts, redisproc.WithConfig(r.opts.Extra...))
	// Generous: the machine may be busy, and a restarted server with data
	// loads it first.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return redisproc.Start(ctx, opts...)
}

// Addr is host:port of the server.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// TLSAddr is host:port of the server's TLS port ("" without RedisOptions.TLS).
func (r *Redis) TLSAddr() string {
	if r.tlsPort == 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(r.tlsPort)
}

// Dir is the server's data directory.
func (r *Redis) Dir() string { return r.dir }

// Client returns a new go-redis client, closed with t.Cleanup.
func (r *Redis) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.opts.Password, MaxRetries: -1})
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL and waits until the process is gone.
func (r *Redis) Kill() {
	if srv := r.take(); srv != nil {
		srv.Kill()
	}
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 5 s). Safe to call twice.
func (r *Redis) Stop() {
	if srv := r.take(); srv != nil {
		srv.Stop()
	}
}

func (r *Redis) take() *redisproc.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	srv := r.srv
	r.srv = nil
	return srv
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (r *Redis) Pause()  { r.with((*redisproc.Server).Pause) }
func (r *Redis) Resume() { r.with((*redisproc.Server).Resume) }

func (r *Redis) with(f func(*redisproc.Server) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		_ = f(r.srv)
	}
}

// Restart stops the server (SIGTERM, or SIGKILL when hard is true) and starts
// it again on the same port with the same data dir; it returns once the
// server has loaded its data.
func (r *Redis) Restart(hard bool) {
	r.t.Helper()
	if hard {
		r.Kill()
	} else {
		r.Stop()
	}
	var err error
	// A killed server's port can take a moment to be released.
	for i := 0; i < 50; i++ {
		var srv *redisproc.Server
		if srv, err = r.start(r.port); err == nil {
			r.mu.Lock()
			r.srv = srv
			r.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("testenv: restart redis: %v", err)
}

// Flush empties the server; handy between sub-tests.
func (r *Redis) Flush(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.opts.Password})
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

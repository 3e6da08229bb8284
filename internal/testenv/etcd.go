package testenv

import (
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// Etcd is an in-process etcd server (embed) on free ports.
type Etcd struct {
	t        testing.TB
	srv      *embed.Etcd
	endpoint string

	mu      sync.Mutex
	clients []*clientv3.Client
	closed  bool
}

// A test's etcd writes little: 4 MB WAL segments instead of etcd's
// preallocated 64 MB keep a suite of many etcds within a small disk.
func init() { wal.SegmentSizeBytes = 4 << 20 }

// StartEtcd starts a single-member etcd in a temp dir. Clients made with
// Client are closed before the server, and the server is closed once, by
// t.Cleanup.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		e, err := startEtcd(t)
		if err == nil {
			t.Cleanup(e.Close)
			return e
		}
		lastErr = err
	}
	t.Fatalf("testenv: start etcd: %v", lastErr)
	return nil
}

func startEtcd(t testing.TB) (*Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(FreePort(t)))
	pu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(FreePort(t)))
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-srv.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		srv.Close()
		return nil, errTimeout
	}
	return &Etcd{t: t, srv: srv, endpoint: cu.String()}, nil
}

type timeoutError struct{}

func (timeoutError) Error() string { return "etcd did not become ready in 30s" }

var errTimeout error = timeoutError{}

// Endpoint is the client URL.
func (e *Etcd) Endpoint() string { return e.endpoint }

// Server is the embedded server, for tests that need to poke it.
func (e *Etcd) Server() *embed.Etcd { return e.srv }

// Client returns a new client; it is closed before the server.
func (e *Etcd) Client() *clientv3.Client {
	e.t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		e.t.Fatalf("testenv: etcd client: %v", err)
	}
	e.mu.Lock()
	e.clients = append(e.clients, c)
	e.mu.Unlock()
	return c
}

// Close closes every client, then the server. Safe to call more than once.
func (e *Etcd) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	cs := e.clients
	e.clients = nil
	e.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
	e.srv.Close()
}

package server

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/region/identity"
	"github.com/ax-sched/ax/task"
)

// redisClient puts redis.tls on every mode's connections (the sentinels'
// too) and passes the sentinels' own password. Single mode over TLS runs
// for real in internal/e2e (TestTLSOnEveryHop).
func TestRedisClientTLSInEveryMode(t *testing.T) {
	certs := testenv.NewCerts(t)
	tlsOn := config.RedisTLS{CA: certs.CA, Cert: certs.Client, Key: certs.ClientKey, ServerName: "redis.internal"}
	for _, c := range []struct {
		name string
		cfg  config.Redis
	}{
		{"rediss addr", config.Redis{Addr: "rediss://10.0.0.1:6380"}},
		{"addr with tls", config.Redis{Addr: "10.0.0.1:6380", TLS: tlsOn}},
		{"sentinel", config.Redis{Sentinel: config.Sentinel{MasterName: "m", Addrs: []string{"10.0.0.1:26379"}, Password: "sp"}, TLS: tlsOn}},
		{"cluster", config.Redis{Cluster: config.RedisCluster{Addrs: []string{"10.0.0.1:7000"}}, TLS: tlsOn}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc, err := redisClient(c.cfg, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var tc *tls.Config
			switch x := rc.(type) {
			case *redis.Client: // single and sentinel (a failover client)
				tc = x.Options().TLSConfig
				if c.cfg.Mode() == "addr" && x.Options().Addr != "10.0.0.1:6380" {
					t.Errorf("addr %q, want the host:port of the URL", x.Options().Addr)
				}
			case *redis.ClusterClient:
				tc = x.Options().TLSConfig
			default:
				t.Fatalf("client %T", rc)
			}
			if tc == nil {
				t.Fatal("no TLS")
			}
			if c.cfg.TLS.CA != "" && (tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "redis.internal") {
				t.Errorf("TLS config lacks the CA, the client certificate or the server name: %+v", tc)
			}
			if tc.InsecureSkipVerify {
				t.Error("InsecureSkipVerify on")
			}
		})
	}
	if _, err := redisClient(config.Redis{Addr: "h:1", TLS: config.RedisTLS{CA: certs.Dir + "/none.pem"}}, 0, nil); err == nil {
		t.Error("a missing CA file: no error")
	}
}

// Sentinel and Cluster over TLS for real: a master, a replica and three
// sentinels, and a 3-master cluster (tls-cluster yes), every one reached
// by ax only on its TLS port with a client certificate (tls-auth-clients
// yes); the store that redisClient builds from the config runs a
// submit → claim → complete on each. Through Sentinel, the master address
// the sentinels give is its TLS port; on the cluster every shard is used.
func TestRedisTLSSentinelAndClusterRunForReal(t *testing.T) {
	testenv.Slow(t)
	certs := testenv.NewCerts(t)
	tlsOn := config.RedisTLS{Enabled: true, CA: certs.CA, Cert: certs.Client, Key: certs.ClientKey}
	set := testenv.StartRedisSentinel(t, testenv.SentinelOptions{TLS: certs})
	cl := testenv.StartRedisClusterTLS(t, certs, 3)
	if a, err := set.MasterAddr(context.Background()); err != nil || a != set.Master.TLSAddr() {
		t.Fatalf("the sentinels name the master at %s (%v), want its TLS port %s", a, err, set.Master.TLSAddr())
	}
	for _, c := range []struct {
		name   string
		cfg    config.Redis
		shards int
	}{
		{"sentinel", config.Redis{Sentinel: config.Sentinel{MasterName: testenv.SentinelMaster, Addrs: set.SentinelTLSAddrs()}, TLS: tlsOn}, 1},
		{"cluster", config.Redis{Cluster: config.RedisCluster{Addrs: cl.TLSAddrs()}, TLS: tlsOn}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// With a server's identity guard: the sentinels' connections
			// pass it, the master's and every cluster node's are marked.
			guard := identity.NewGuard(redisNode(c.cfg), identity.ID{Federation: "f", Region: "tls-1", Shards: c.shards}, true, nil)
			rc, err := redisClient(c.cfg, 0, guard)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			st, err := store.New(rc, queue.Options{Region: "tls-1", Shards: c.shards})
			if err != nil {
				t.Fatal(err)
			}
			var nts []queue.NewTask
			for range 2 * c.shards {
				sp := &task.Spec{Type: "noop"}
				if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
					t.Fatal(err)
				}
				nts = append(nts, queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true})
			}
			res, err := st.Submitter().Submit(ctx, nts...)
			if err != nil {
				t.Fatalf("submit over TLS: %v", err)
			}
			claimed, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: len(nts)})
			if err != nil || len(claimed) != len(nts) {
				t.Fatalf("claim over TLS: %d of %d, %v", len(claimed), len(nts), err)
			}
			var cs []queue.Completion
			for _, tk := range claimed {
				cs = append(cs, queue.Completion{ID: tk.ID, Token: tk.LeaseToken})
			}
			if errs, err := st.Claimer().Complete(ctx, cs...); err != nil || errors.Join(errs...) != nil {
				t.Fatalf("complete over TLS: %v %v", err, errs)
			}
			for _, r := range res {
				got, err := st.Get(ctx, r.ID)
				if err != nil || got.State != task.Success {
					t.Fatalf("task %s after complete: %+v %v", r.ID, got, err)
				}
			}
		})
	}
}

// A call's context deadline bounds it: the health gate's probe and the
// API's calls rely on it (queue/health).
func TestRedisClientBoundsCallsByTheirDeadline(t *testing.T) {
	rdb, err := redisClient(config.Redis{Addr: "127.0.0.1:1"}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if !rdb.(*redis.Client).Options().ContextTimeoutEnabled {
		t.Fatal("the client does not bound a call by its context's deadline")
	}
}

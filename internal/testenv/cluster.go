package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/internal/redisproc"
)

// RedisCluster is a real Redis Cluster of masters only (redisproc.StartCluster:
// redis-server processes started with cluster-enabled yes and joined by
// `redis-cli --cluster create`, every one of the 16384 slots served).
type RedisCluster struct {
	*redisproc.Cluster
}

// StartRedisCluster starts a cluster of masters (≥ 3, as redis-cli
// requires) and waits until every node reports cluster_state ok with every
// slot served. It is stopped with t.Cleanup. A missing redis-server or
// redis-cli fails the test.
func StartRedisCluster(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := startCluster(ctx, masters)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

func startCluster(ctx context.Context, masters int) (*RedisCluster, error) {
	c, err := redisproc.StartCluster(ctx, masters, 0, redisproc.WithStopGrace(5*time.Second),
		redisproc.WithConfig("loglevel warning", "cluster-node-timeout 5000"))
	if errors.Is(err, redisproc.ErrNotFound) || errors.Is(err, redisproc.ErrCLINotFound) {
		return nil, fmt.Errorf("start redis cluster: %v (run `make deps` or `make test`, which install it)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("start redis cluster: %w", err)
	}
	return &RedisCluster{c}, nil
}

// Client returns a new cluster client, closed with t.Cleanup.
func (c *RedisCluster) Client(t testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Flush empties every master.
func (c *RedisCluster) Flush(ctx context.Context) error {
	for _, n := range c.Nodes() {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		err := rc.FlushAll(ctx).Err()
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("flush %s: %w", n.Addr(), err)
		}
	}
	return nil
}

// ModeEnv selects the Redis that suites built on Suite run against:
// unset, "" or "single": a redis-server of its own per test; "cluster": one
// 3-master Redis Cluster shared by the test binary (started by Main),
// emptied before each test, with the store spread over 3 shards.
const ModeEnv = "AX_TEST_REDIS"

// SuiteMasters is the size of the shared cluster.
const SuiteMasters = 3

// ClusterMode reports whether ModeEnv asks for the cluster. Any value
// other than "", "single" and "cluster" panics: a typo must not run the
// single-Redis suite while claiming to test the cluster.
func ClusterMode() bool {
	switch v := os.Getenv(ModeEnv); v {
	case "", "single":
		return false
	case "cluster":
		return true
	default:
		panic(fmt.Sprintf("testenv: %s=%q; want single or cluster", ModeEnv, v))
	}
}

// suite is the cluster Main started for the test binary. A package
// variable because TestMain has no other way to hand it to the tests.
var suite struct {
	mu sync.Mutex
	c  *RedisCluster
}

// Runner is what TestMain runs (testing.M, goleak.TestingM).
type Runner interface{ Run() int }

// Main wraps m for TestMain. In cluster mode its Run starts the shared
// cluster before the tests and stops it after them (before a goleak check
// of the caller looks for leftover goroutines); otherwise it is m.Run.
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m).Run()) }
func Main(m Runner) Runner { return mainRunner{m} }

type mainRunner struct{ m Runner }

func (r mainRunner) Run() int {
	if !ClusterMode() {
		return r.m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	c, err := startCluster(ctx, SuiteMasters)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %s=cluster: %v\n", ModeEnv, err)
		return 1
	}
	suite.mu.Lock()
	suite.c = c
	suite.mu.Unlock()
	code := r.m.Run()
	suite.mu.Lock()
	suite.c = nil
	suite.mu.Unlock()
	c.Stop()
	return code
}

// SuiteCluster returns the shared cluster, emptied for t, or nil when not
// in cluster mode. In cluster mode without Main it fails t.
func SuiteCluster(t testing.TB) *RedisCluster {
	t.Helper()
	if !ClusterMode() {
		return nil
	}
	suite.mu.Lock()
	c := suite.c
	suite.mu.Unlock()
	if c == nil {
		t.Fatalf("testenv: %s=cluster, but the package's TestMain does not run testenv.Main", ModeEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return c
}

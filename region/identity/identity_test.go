package identity_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/region/identity"
	"github.com/redis/go-redis/v9"
)

// client is a Redis client of the Redis at addr whose new connections g
// checks.
func client(t *testing.T, addr string, g *identity.Guard) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, OnConnect: g.OnConnect, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The first server marks its region's Redis; a server of another
// federation, or of another region, is refused it; a worker holds the
// federation it first found.
func TestGuardMarksOnceAndRefusesOtherOwners(t *testing.T) {
	ctx := context.Background()
	a := testenv.StartRedis(t, testenv.RedisOptions{})
	b := testenv.StartRedis(t, testenv.RedisOptions{})
	own := identity.ID{Federation: "f1", Region: "us-east-1", Shards: 1}
	if err := client(t, a.Addr(), identity.NewGuard(a.Addr(), own, true, nil)).Ping(ctx).Err(); err != nil {
		t.Fatalf("first server: %v", err)
	}
	if got, err := a.Client().Get(ctx, identity.Key).Result(); err != nil || got == "" {
		t.Fatalf("%s after the first server: %q, %v", identity.Key, got, err)
	}
	cases := []struct {
		name string
		id   identity.ID
		mark bool
		ok   bool
	}{
		{"same federation and region", own, true, true},
		{"another federation", identity.ID{Federation: "f2", Region: "us-east-1", Shards: 1}, true, false},
		{"another region", identity.ID{Federation: "f1", Region: "eu-west-1", Shards: 1}, true, false},
		{"other shards", identity.ID{Federation: "f1", Region: "us-east-1", Shards: 4}, true, false},
		{"a worker of the region", identity.ID{Region: "us-east-1", Shards: 1}, false, true},
		{"a worker of another region", identity.ID{Region: "eu-west-1", Shards: 1}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := client(t, a.Addr(), identity.NewGuard(a.Addr(), c.id, c.mark, nil)).Ping(ctx).Err()
			if c.ok != (err == nil) || !c.ok && !errors.Is(err, identity.ErrMismatch) {
				t.Fatalf("ping: %v, want ok %v (else a mismatch)", err, c.ok)
			}
		})
	}

	// A worker that found f1 refuses a Redis marked for f2 on its next
	// connection (its address now reaches another federation's Redis).
	wg := identity.NewGuard("r", identity.ID{Region: "us-east-1", Shards: 1}, false, nil)
	if err := client(t, a.Addr(), wg).Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client(t, b.Addr(), identity.NewGuard(b.Addr(), identity.ID{Federation: "f2", Region: "us-east-1", Shards: 1}, true, nil)).Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client(t, b.Addr(), wg).Ping(ctx).Err(); !errors.Is(err, identity.ErrMismatch) {
		t.Fatalf("worker of f1 on f2's Redis: %v, want a mismatch", err)
	}
}

// Through Sentinel, the guard passes the connections to the sentinels
// (they hold no data) and checks the master's: the first server marks it,
// another federation's is refused it.
func TestGuardThroughSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a master, a replica and three sentinels")
	}
	ctx := context.Background()
	set := testenv.StartRedisSentinel(t, testenv.SentinelOptions{Replicas: 1})
	failover := func(g *identity.Guard) *redis.Client {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: testenv.SentinelMaster, SentinelAddrs: set.SentinelAddrs(),
			OnConnect: g.OnConnect, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	own := identity.ID{Federation: "f1", Region: "us-east-1", Shards: 1}
	if err := failover(identity.NewGuard("sentinel:ax", own, true, nil)).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("first server through Sentinel: %v", err)
	}
	if got, err := set.Master.Client().Get(ctx, identity.Key).Result(); err != nil || !strings.Contains(got, `"f1"`) {
		t.Fatalf("the master's %s: %q, %v; want f1's identity", identity.Key, got, err)
	}
	other := identity.ID{Federation: "f2", Region: "us-east-1", Shards: 1}
	if err := failover(identity.NewGuard("sentinel:ax", other, true, nil)).Ping(ctx).Err(); !errors.Is(err, identity.ErrMismatch) {
		t.Fatalf("another federation through Sentinel: %v, want a mismatch", err)
	}
}

// On a Redis Cluster every node is marked and checked on its own
// connections: each master holds the identity in a slot it serves, and a
// server of another federation is refused every node.
func TestGuardOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	ctx := context.Background()
	rc := testenv.StartRedisCluster(t, 3)
	cluster := func(g *identity.Guard) *redis.ClusterClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs(), OnConnect: g.OnConnect, MaxRedirects: 1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ping := func(c *redis.ClusterClient) error {
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
	}
	own := identity.ID{Federation: "f1", Region: "us-east-1", Shards: 3}
	if err := ping(cluster(identity.NewGuard("cluster", own, true, nil))); err != nil {
		t.Fatalf("first server: %v", err)
	}
	for _, n := range rc.Nodes() {
		// A plain client: each node serves its own key (no MOVED).
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		keys, err := c.Keys(ctx, identity.Key+":*").Result()
		if err == nil && len(keys) == 1 {
			var got string
			got, err = c.Get(ctx, keys[0]).Result()
			if err == nil && !strings.Contains(got, `"f1"`) {
				err = errors.New("holds " + got)
			}
		} else if err == nil {
			err = errors.New("keys " + strings.Join(keys, ", "))
		}
		_ = c.Close()
		if err != nil {
			t.Fatalf("node %s: %v; want one identity key of f1, served there", n.Addr(), err)
		}
	}
	cases := []struct {
		name string
		id   identity.ID
		mark bool
		ok   bool
	}{
		{"same federation", own, true, true},
		{"another federation", identity.ID{Federation: "f2", Region: "us-east-1", Shards: 3}, true, false},
		{"a worker of the region", identity.ID{Region: "us-east-1", Shards: 3}, false, true},
		{"a worker of another region", identity.ID{Region: "eu-west-1", Shards: 3}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ping(cluster(identity.NewGuard("cluster", c.id, c.mark, nil)))
			if c.ok != (err == nil) || !c.ok && !errors.Is(err, identity.ErrMismatch) {
				t.Fatalf("ping every master: %v, want ok %v (else a mismatch)", err, c.ok)
			}
		})
	}
}

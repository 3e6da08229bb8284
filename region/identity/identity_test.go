package identity_test

import (
	"context"
	"errors"
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

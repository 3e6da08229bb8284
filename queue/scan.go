package queue

import (
	"context"
	"fmt"

	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Filter selects tasks for operator bulk actions; empty fields match all.
type Filter struct {
	Type   string
	Tenant string
	State  task.State // PENDING or READY; "" both
	Pool   string     // READY tasks of this pool only
}

func (f Filter) Match(t *task.Task) bool {
	return (f.Type == "" || t.Type == f.Type) && (f.Tenant == "" || t.Tenant == f.Tenant) &&
		(f.State == "" || t.State == f.State) && (f.Pool == "" || t.Pool == f.Pool && t.State == task.Ready)
}

// scanKeys lists the keys matching a pattern. On a cluster the client
// sends a SCAN whose pattern holds a hash tag (every shard's does) to the
// master serving that slot.
func (s *Engine) ScanKeys(ctx context.Context, match string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, match, 500).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: scan: %w", err)
		}
		out = append(out, keys...)
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// DrainMove is one READY task to move out of the region.
type DrainMove struct{ ID, Region, Pool string }

// Ping checks the region's Redis answers and runs with noeviction (a
// store that may evict can lose accepted tasks): every master of a
// cluster.
func (s *Engine) Ping(ctx context.Context) error {
	if cc := s.Cluster(); cc != nil {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return ping(ctx, c) })
	}
	return ping(ctx, s.rdb)
}

func ping(ctx context.Context, rdb redis.Cmdable) error {
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("queue: redis: %w", err)
	}
	v, err := rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return fmt.Errorf("queue: redis config: %w", err)
	}
	if p := v["maxmemory-policy"]; p != "" && p != "noeviction" {
		return fmt.Errorf("queue: redis maxmemory-policy is %q; ax needs noeviction", p)
	}
	return nil
}

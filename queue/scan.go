package queue

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
	"strconv"
	"strings"
)

// Filter selects tasks for operator bulk actions; empty fields match all.
type Filter struct {
	Type   string
	Tenant string
	State  task.State // PENDING or READY; "" both
	Pool   string     // READY tasks of this pool only
}

func (f Filter) match(t *task.Task) bool {
	return (f.Type == "" || t.Type == f.Type) && (f.Tenant == "" || t.Tenant == f.Tenant) &&
		(f.State == "" || t.State == f.State) && (f.Pool == "" || t.Pool == f.Pool && t.State == task.Ready)
}

// Waiting scans PENDING and READY tasks matching f, calling fn with
// batches of up to 500. It is an operator path (O(waiting tasks)), not a
// hot one.
func (s *Tasks) Waiting(ctx context.Context, f Filter, fn func([]*task.Task) error) error {
	for shard := range s.Keys {
		p := s.Keys[shard].Prefix
		sets := []string{}
		if f.State == "" || f.State == task.Pending {
			// The outbox too: a cancel there is a request the hand-off
			// carries (cancel.lua).
			sets = append(sets, p+"delayed", p+"dn", p+"due", p+"outbox")
			// Pinned delayed tasks wait in per-pool delayed sets.
			ds, err := s.scanKeys(ctx, p+"d:*")
			if err != nil {
				return err
			}
			sets = append(sets, ds...)
		}
		if f.State == "" || f.State == task.Ready {
			match := p + "q:*"
			if f.Pool != "" {
				match = p + "q:" + f.Pool + ":*"
			}
			qs, err := s.scanKeys(ctx, match)
			if err != nil {
				return err
			}
			sets = append(sets, qs...)
		}
		for _, set := range sets {
			var cursor uint64
			for {
				kv, next, err := s.RDB.ZScan(ctx, set, cursor, "", 500).Result()
				if err != nil {
					return fmt.Errorf("queue: zscan: %w", err)
				}
				ids := make([]string, 0, len(kv)/2)
				for i := 0; i < len(kv); i += 2 {
					if !strings.HasPrefix(kv[i], "~") { // a marker of a pinned delayed set
						ids = append(ids, kv[i])
					}
				}
				ts, err := s.GetMany(ctx, shard, ids)
				if err != nil {
					return err
				}
				var keep []*task.Task
				for _, t := range ts {
					if f.match(t) {
						keep = append(keep, t)
					}
				}
				if len(keep) > 0 {
					if err := fn(keep); err != nil {
						return err
					}
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		if f.State == "" || f.State == task.Pending {
			if err := s.waitingCold(ctx, shard, f, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanKeys lists the keys matching a pattern. On a cluster the client
// sends a SCAN whose pattern holds a hash tag (every shard's does) to the
// master serving that slot.
func (s *Engine) scanKeys(ctx context.Context, match string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		keys, next, err := s.RDB.Scan(ctx, cursor, match, 500).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: scan: %w", err)
		}
		out = append(out, keys...)
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// CancelWhere cancels every PENDING/READY task matching f and returns how
// many it cancelled.
func (s *Tasks) CancelWhere(ctx context.Context, f Filter, by string) (int, error) {
	n := 0
	err := s.Waiting(ctx, f, func(ts []*task.Task) error {
		for _, t := range ts {
			if _, err := s.Cancel(ctx, t.ID, task.ReasonCanceledByUser, by); err == nil {
				n++
			}
		}
		return nil
	})
	return n, err
}

// DrainMove is one READY task to move out of the region.
type DrainMove struct{ ID, Region, Pool string }

// Drain moves READY tasks into the outbox, bound for other regions. An
// operator's drain passes no fence; a leader loop passes its own, and gets
// ErrFenced once a newer leader exists.
func (s *HandOffs) Drain(ctx context.Context, moves []DrainMove, f ...Fence) (int, error) {
	byShard := make([][]any, s.Opts.Shards)
	for _, m := range moves {
		shard, err := s.ShardOf(m.ID)
		if err != nil {
			continue
		}
		byShard[shard] = append(byShard[shard], m.ID, m.Region, m.Pool)
	}
	total := 0
	for shard, items := range byShard {
		for start := 0; start < len(items); start += 3 * MaxBatch {
			chunk := items[start:min(start+3*MaxBatch, len(items))]
			keys := s.KeysWith(shard, s.Keys[shard].Prefix+"outbox")
			token := ""
			if len(f) > 0 {
				keys = append(keys, s.fenceKey(shard, f[0]))
				token = strconv.FormatInt(f[0].Token, 10)
			}
			argv := append([]any{s.Clock(), len(chunk) / 3, token}, chunk...)
			out, err := s.Run(ctx, s.RDB, Scripts.drain, keys, argv...).Slice()
			if err != nil {
				return total, fmt.Errorf("queue: drain: %w", err)
			}
			if fenced(out) {
				return total, ErrFenced
			}
			total += ToInt(out[0])
		}
	}
	return total, nil
}

// Ping checks the region's Redis answers and runs with noeviction (a
// store that may evict can lose accepted tasks): every master of a
// cluster.
func (s *Engine) Ping(ctx context.Context) error {
	if cc := s.Cluster(); cc != nil {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return ping(ctx, c) })
	}
	return ping(ctx, s.RDB)
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

package handoffs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Held returns up to limit held hand-offs per shard received before
// before, oldest first. Read-only.
func (s *HandOffs) Held(ctx context.Context, before time.Time, limit int) ([]queue.HeldTask, error) {
	limit = queue.ClampBatch(limit)
	max := strconv.FormatInt(before.UnixMilli(), 10)
	var out []queue.HeldTask
	for shard := range s.Shards() {
		p := s.Prefix(shard)
		zs, err := s.Client().ZRangeByScoreWithScores(ctx, queue.HeldKey(p), &redis.ZRangeBy{Min: "-inf", Max: max, Count: int64(limit)}).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: held: %w", err)
		}
		if len(zs) == 0 {
			continue
		}
		pipe := s.Client().Pipeline()
		cmds := make([]*redis.StringCmd, len(zs))
		for i, z := range zs {
			cmds[i] = pipe.HGet(ctx, queue.TaskKey(p, z.Member.(string)), "hf")
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, fmt.Errorf("queue: held: %w", err)
		}
		for i, z := range zs {
			from, err := cmds[i].Result()
			if err != nil {
				continue // settled meanwhile
			}
			out = append(out, queue.HeldTask{ID: z.Member.(string), From: from, At: time.UnixMilli(int64(z.Score))})
		}
	}
	return out, nil
}

// Release makes held hand-offs from region from go where they would have
// gone when they arrived (READY in their pool, or delayed until due): their
// sender recorded them as handed here. It returns how many it released
// (ids not held from that region are left alone).
func (s *HandOffs) Release(ctx context.Context, from string, ids []string) (int, error) {
	return s.settleHeld(ctx, "release", from, ids)
}

// Drop deletes held hand-offs from region from, record and trail: their
// sender placed them elsewhere, so this region must never run them. A task
// of this region (handed back home) keeps a forwarding record to from
// instead, so its id still leads to it. It returns how many it dropped.
func (s *HandOffs) Drop(ctx context.Context, from string, ids []string) (int, error) {
	var own, others []string
	for _, id := range ids {
		if p, err := task.ParseID(id); err == nil && p.Region == s.Options().Region {
			own = append(own, id)
		} else {
			others = append(others, id)
		}
	}
	n, err := s.settleHeld(ctx, "drop", from, others)
	if err != nil {
		return n, err
	}
	k, err := s.settleHeld(ctx, "forward", from, own)
	return n + k, err
}

func (s *HandOffs) settleHeld(ctx context.Context, op, from string, ids []string) (int, error) {
	byShard := make([][]string, s.Shards())
	for _, id := range ids {
		shard, err := s.ShardOf(id)
		if err != nil {
			continue // never stored here
		}
		byShard[shard] = append(byShard[shard], id)
	}
	n := 0
	for shard, ids := range byShard {
		for start := 0; start < len(ids); start += queue.MaxBatch {
			chunk := ids[start:min(start+queue.MaxBatch, len(ids))]
			argv := make([]any, 0, 4+len(chunk))
			argv = append(argv, s.Clock(), op, from, s.Options().RetainDead.Milliseconds())
			for _, id := range chunk {
				argv = append(argv, id)
			}
			out, err := s.Run(ctx, s.Client(), queue.Scripts.Held, s.KeysWith(shard, queue.HeldKey(s.Prefix(shard))), argv...).StringSlice()
			if err != nil {
				return n, fmt.Errorf("queue: %s held hand-offs: %w", op, err)
			}
			for _, c := range out {
				if c == "0" {
					n++
				}
			}
		}
	}
	return n, nil
}

// HandOffWord is this region's word, as the sender, on hand-offs that
// target holds: for each id, what this region's record of it says
// (committed, revoked, pending or unknown, in input order). Read-only: the
// record is the one decision (held.lua), so its state is the answer.
func (s *HandOffs) HandOffWord(ctx context.Context, target string, ids []string) ([]string, error) {
	out := make([]string, len(ids))
	pipe := s.Client().Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		shard, err := s.ShardOf(id)
		if err != nil {
			out[i] = queue.WordUnknown
			continue
		}
		cmds[i] = pipe.HMGet(ctx, queue.TaskKey(s.Prefix(shard), id), "st", "ho", "ob")
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("queue: hand-off word: %w", err)
		}
	}
	now := s.Now()
	keep := min(s.Options().RetainSuccess, s.Options().RetainCanceled, s.Options().RetainDead)
	for i, c := range cmds {
		if c == nil {
			continue
		}
		v := c.Val()
		str := func(k int) string { s, _ := v[k].(string); return s }
		switch st := str(0); {
		case st == "":
			// Ids carry their creation time: a record cannot have expired
			// before the task is as old as the shortest retention.
			if p, err := task.ParseID(ids[i]); err == nil && now.Sub(p.Time) < keep {
				out[i] = queue.WordUnknown
			} else {
				out[i] = queue.WordRevoked
			}
		case st == "H" && str(1) == target:
			out[i] = queue.WordCommitted
		case st == "P" && str(2) == target:
			out[i] = queue.WordPending
		default:
			out[i] = queue.WordRevoked
		}
	}
	return out, nil
}

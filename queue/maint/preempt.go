package maint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Running lists the RUNNING tasks of a pool (O(running tasks of the
// region); the leader calls it only when a pool is full and an urgent task
// waits).
func (s *Maintainer) Running(ctx context.Context, pool string) ([]queue.RunningTask, error) {
	var out []queue.RunningTask
	for shard := range s.Shards() {
		ids, err := s.Client().ZRange(ctx, queue.RunningKey(s.Prefix(shard)), 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: running: %w", err)
		}
		pipe := s.Client().Pipeline()
		cmds := make([]interface{ Val() []any }, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, queue.TaskKey(s.Prefix(shard), id), "st", "po", "pr", "pe", "pc", "sa", "lt", "wk", "sl")
		}
		if len(ids) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, fmt.Errorf("queue: running: %w", err)
			}
		}
		for i, c := range cmds {
			v := c.Val()
			str := func(k int) string { s, _ := v[k].(string); return s }
			if str(0) != "U" || str(1) != pool {
				continue
			}
			rt := queue.RunningTask{ID: ids[i], Pool: pool, Priority: record.Atoi(str(2)), Preemptible: str(3) == "1",
				PreemptCount: record.Atoi(str(4)), Token: str(6), Worker: str(7), Slots: milli(str(8))}
			if t := record.MsTime(str(5)); t != nil {
				rt.StartedAt = *t
			}
			out = append(out, rt)
		}
	}
	return out, nil
}

// milli is a record's sl as milli-slots ("" or 0: a whole slot).
func milli(sl string) int {
	if m := record.Atoi(sl); m > 0 {
		return m
	}
	return task.MilliSlots
}

// Heads returns, for each priority of a pool that has READY tasks, the
// oldest one.
func (s *Maintainer) Heads(ctx context.Context, pool string) ([]queue.WaitingHead, error) {
	var out []queue.WaitingHead
	for shard := range s.Shards() {
		for p := 0; p <= task.MaxPriority; p++ {
			z, err := s.Client().ZRangeWithScores(ctx, queue.ReadyKey(s.Prefix(shard), pool, p), 0, 0).Result()
			if err != nil {
				return nil, fmt.Errorf("queue: heads: %w", err)
			}
			for _, m := range z {
				id := fmt.Sprint(m.Member)
				sl, err := s.Client().HGet(ctx, queue.TaskKey(s.Prefix(shard), id), "sl").Result()
				if err != nil && !errors.Is(err, redis.Nil) {
					return nil, fmt.Errorf("queue: heads: %w", err)
				}
				out = append(out, queue.WaitingHead{ID: id, Priority: p, Slots: milli(sl), EnqueuedAt: time.UnixMilli(int64(m.Score))})
			}
		}
	}
	return out, nil
}

// RequestPreemption asks the worker running id (with lease token) to give
// it back (leader only). It returns false with a reason when refused.
func (s *Maintainer) RequestPreemption(ctx context.Context, f queue.Fence, id, token, preemptor string) (bool, string, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return false, "", err
	}
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Preempt, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f)), s.Clock(), f.Token, id, token, preemptor).Slice()
	if err != nil {
		return false, "", fmt.Errorf("queue: preempt: %w", err)
	}
	if queue.Fenced(out) {
		return false, "", queue.ErrFenced
	}
	if queue.ToInt(out[0]) == queue.CodeOK {
		return true, "", nil
	}
	return false, queue.ToStr(out[1]), nil
}

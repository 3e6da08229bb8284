package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ax-sched/ax/task"
)

// RunningTask is what the preemption decision needs of a RUNNING task.
type RunningTask struct {
	ID, Token, Pool, Worker string
	Priority                int
	Preemptible             bool
	PreemptCount            int
	StartedAt               time.Time
}

// Running lists the RUNNING tasks of a pool (O(running tasks of the
// region); the leader calls it only when a pool is full and an urgent task
// waits).
func (s *Maintainer) Running(ctx context.Context, pool string) ([]RunningTask, error) {
	var out []RunningTask
	for shard := range s.keys {
		ids, err := s.rdb.ZRange(ctx, s.keys[shard].base[3], 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: running: %w", err)
		}
		pipe := s.rdb.Pipeline()
		cmds := make([]interface{ Val() []any }, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, s.keys[shard].prefix+"t:"+id, "st", "po", "pr", "pe", "pc", "sa", "lt", "wk")
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
			rt := RunningTask{ID: ids[i], Pool: pool, Priority: atoi(str(2)), Preemptible: str(3) == "1",
				PreemptCount: atoi(str(4)), Token: str(6), Worker: str(7)}
			if t := msTime(str(5)); t != nil {
				rt.StartedAt = *t
			}
			out = append(out, rt)
		}
	}
	return out, nil
}

// WaitingHead is the oldest READY task of a pool at one priority.
type WaitingHead struct {
	ID         string
	Priority   int
	EnqueuedAt time.Time
}

// Heads returns, for each priority of a pool that has READY tasks, the
// oldest one.
func (s *Maintainer) Heads(ctx context.Context, pool string) ([]WaitingHead, error) {
	var out []WaitingHead
	for shard := range s.keys {
		for p := 0; p <= task.MaxPriority; p++ {
			z, err := s.rdb.ZRangeWithScores(ctx, s.keys[shard].prefix+"q:"+pool+":"+strconv.Itoa(p), 0, 0).Result()
			if err != nil {
				return nil, fmt.Errorf("queue: heads: %w", err)
			}
			for _, m := range z {
				out = append(out, WaitingHead{ID: fmt.Sprint(m.Member), Priority: p, EnqueuedAt: time.UnixMilli(int64(m.Score))})
			}
		}
	}
	return out, nil
}

// RequestPreemption asks the worker running id (with lease token) to give
// it back (leader only). It returns false with a reason when refused.
func (s *Maintainer) RequestPreemption(ctx context.Context, f Fence, id, token, preemptor string) (bool, string, error) {
	shard, err := s.shardOf(id)
	if err != nil {
		return false, "", err
	}
	out, err := s.run(ctx, s.rdb, scripts.preempt, s.keysWith(shard, s.fenceKey(shard, f)), s.clock(), f.Token, id, token, preemptor).Slice()
	if err != nil {
		return false, "", fmt.Errorf("queue: preempt: %w", err)
	}
	if fenced(out) {
		return false, "", ErrFenced
	}
	if toInt(out[0]) == codeOK {
		return true, "", nil
	}
	return false, toStr(out[1]), nil
}

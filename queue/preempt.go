package queue

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/task"
	"strconv"
	"time"
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
	for shard := range s.Keys {
		ids, err := s.RDB.ZRange(ctx, s.Keys[shard].Base[3], 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: running: %w", err)
		}
		pipe := s.RDB.Pipeline()
		cmds := make([]interface{ Val() []any }, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, s.Keys[shard].Prefix+"t:"+id, "st", "po", "pr", "pe", "pc", "sa", "lt", "wk")
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
	for shard := range s.Keys {
		for p := 0; p <= task.MaxPriority; p++ {
			z, err := s.RDB.ZRangeWithScores(ctx, s.Keys[shard].Prefix+"q:"+pool+":"+strconv.Itoa(p), 0, 0).Result()
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
	shard, err := s.ShardOf(id)
	if err != nil {
		return false, "", err
	}
	out, err := s.Run(ctx, s.RDB, Scripts.preempt, s.KeysWith(shard, s.fenceKey(shard, f)), s.Clock(), f.Token, id, token, preemptor).Slice()
	if err != nil {
		return false, "", fmt.Errorf("queue: preempt: %w", err)
	}
	if fenced(out) {
		return false, "", ErrFenced
	}
	if ToInt(out[0]) == CodeOK {
		return true, "", nil
	}
	return false, ToStr(out[1]), nil
}

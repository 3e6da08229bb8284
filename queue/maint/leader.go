package maint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Promote moves due delayed tasks on, at most limit per shard and call
// (≤ MaxBatch), in scripts of at most promoteChunk tasks. Pinned tasks
// become READY; the others wait in the due set for placement (DueTasks,
// Place).
func (s *Maintainer) Promote(ctx context.Context, f queue.Fence, limit int, opt ...queue.PromoteOptions) (queue.PromoteResult, error) {
	limit = queue.ClampBatch(limit)
	o := queue.PromoteOptions{Readmit: -1}
	if len(opt) > 0 {
		o = opt[0]
	}
	hot := ""
	if len(o.HotPools) > 0 {
		hot = "," + strings.Join(o.HotPools, ",") + ","
	}
	var res queue.PromoteResult
	for shard := range s.Shards() {
		var next *time.Time
		readmitted := 0
		for done := 0; done < limit; {
			n := min(queue.PromoteChunk, limit-done)
			budget := o.Readmit
			if budget >= 0 {
				budget = max(0, budget-readmitted)
			}
			out, err := s.Run(ctx, s.Client(), queue.Scripts.Promote, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f)),
				s.Clock(), f.Token, n, budget, hot, o.Spread.Milliseconds()).Slice()
			if err != nil {
				return res, fmt.Errorf("queue: promote: %w", err)
			}
			if queue.Fenced(out) {
				return res, queue.ErrFenced
			}
			moved := queue.ToInt(out[0])
			res.Moved += moved
			res.Ready += queue.ToInt(out[1])
			if len(out) > 4 {
				res.Deferred += queue.ToInt(out[3])
				readmitted += queue.ToInt(out[4])
			}
			next = record.MsTime(queue.ToStr(out[2]))
			done += moved
			if len(out) > 5 && queue.ToInt(out[5]) == 0 || len(out) <= 5 && moved < n {
				break // nothing more is due now
			}
			if moved == 0 {
				done++ // the limit was reached by markers alone: still bounded
			}
		}
		res.Readmit += readmitted
		if next != nil && (res.NextDue.IsZero() || next.Before(res.NextDue)) {
			res.NextDue = *next
		}
	}
	return res, nil
}

// DueTasks returns up to limit PENDING tasks that are due and wait for
// placement, oldest first. Read-only. Only what placement reads is filled
// in (id, state, type, tags, regions, priority, critical, tenant, trace):
// leaving the payload and the rest in Redis halves the cost of the read.
func (s *Maintainer) DueTasks(ctx context.Context, limit int) ([]*task.Task, error) {
	limit = queue.ClampBatch(limit)
	var out []*task.Task
	for shard := range s.Shards() {
		ids, err := s.Client().ZRange(ctx, queue.DueKey(s.Prefix(shard)), 0, int64(limit-1)).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: due tasks: %w", err)
		}
		if len(ids) == 0 {
			continue
		}
		p := s.Prefix(shard)
		pipe := s.Client().Pipeline()
		cmds := make([]*redis.SliceCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, queue.TaskKey(p, id), queue.PlacementFields...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("queue: due tasks: %w", err)
		}
		for i, c := range cmds {
			vals := c.Val()
			if len(vals) == 0 || vals[0] == nil {
				continue // gone meanwhile
			}
			var r record.TaskReader
			r.T = &task.Task{ID: ids[i]}
			for j, v := range vals {
				if v, ok := v.(string); ok {
					r.Set(queue.PlacementFields[j], v)
				}
			}
			t := r.Finish(s.Options().Defaults)
			t.HeldBy = s.Options().Region
			out = append(out, t)
		}
	}
	return out, nil
}

// Place applies placement decisions to due tasks (leader only), in scripts
// of at most promoteChunk tasks (a placement costs about what a classic
// promotion does, so the same bound keeps each script near 5 ms).
func (s *Maintainer) Place(ctx context.Context, f queue.Fence, as []queue.Assignment) (queue.PlaceResult, error) {
	var res queue.PlaceResult
	byShard := make([][]any, s.Shards())
	for _, a := range as {
		shard, err := s.ShardOf(a.ID)
		if err != nil {
			res.Skipped++
			continue
		}
		retry := ""
		if a.Pool == "" {
			retry = strconv.FormatInt(a.RetryAt.UnixMilli(), 10)
		}
		byShard[shard] = append(byShard[shard], a.ID, a.Pool, retry, a.Region, a.Reason)
	}
	for shard, items := range byShard {
		for start := 0; start < len(items); start += 5 * queue.PromoteChunk {
			chunk := items[start:min(start+5*queue.PromoteChunk, len(items))]
			argv := append([]any{s.Clock(), f.Token, len(chunk) / 5}, chunk...)
			out, err := s.Run(ctx, s.Client(), queue.Scripts.Place, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f), queue.OutboxKey(s.Prefix(shard))), argv...).Slice()
			if err != nil {
				return res, fmt.Errorf("queue: place: %w", err)
			}
			if queue.Fenced(out) {
				return res, queue.ErrFenced
			}
			res.Placed += queue.ToInt(out[0])
			res.Deferred += queue.ToInt(out[1])
			res.Skipped += queue.ToInt(out[2])
		}
	}
	return res, nil
}

// Reap moves expired leases through TIMEOUT on (leader only), at most limit
// per shard. It returns how many it moved and the next lease expiry.
func (s *Maintainer) Reap(ctx context.Context, f queue.Fence, limit int) (int, time.Time, error) {
	limit = queue.ClampBatch(limit)
	total := 0
	var next time.Time
	for shard := range s.Shards() {
		out, err := s.Run(ctx, s.Client(), queue.Scripts.Reap, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f)), s.Clock(), f.Token,
			limit, rand.IntN(1000), s.Options().RetainDead.Milliseconds(), s.Options().RetainCanceled.Milliseconds(),
			s.Options().Defaults.MaxRetries, s.Options().Defaults.RetryBase.Milliseconds(), s.Options().Defaults.RetryCap.Milliseconds(),
			s.Options().Defaults.Timeout.Milliseconds()).Slice()
		if err != nil {
			return total, next, fmt.Errorf("queue: reap: %w", err)
		}
		if queue.Fenced(out) {
			return total, next, queue.ErrFenced
		}
		total += queue.ToInt(out[0])
		if t := record.MsTime(queue.ToStr(out[1])); t != nil && (next.IsZero() || t.Before(next)) {
			next = *t
		}
	}
	return total, next, nil
}

// Sweep drops dead letters older than the retention and deletes the
// successes past theirs (leader only; sweep.lua): one call of the script a
// shard, each deleting at most limit successes (MaxBatch: ~2.3 ms of
// Redis, BenchmarkSweepSuccesses). The caller repeats while Left, so the
// sweep keeps up with any completion rate, and calls it at least every
// SweepAlive/2 otherwise: complete.lua keeps successes without a TTL only
// while a Sweep ran within SweepAlive.
func (s *Maintainer) Sweep(ctx context.Context, f queue.Fence, limit int) (queue.Swept, error) {
	var r queue.Swept
	for shard := range s.Shards() {
		out, err := s.Run(ctx, s.Client(), queue.Scripts.Sweep, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f)), s.Clock(), f.Token,
			s.Options().RetainDead.Milliseconds(), queue.ClampBatch(limit), s.Options().RetainSuccess.Milliseconds(), queue.ClampBatch(limit),
			queue.SweepAlive.Milliseconds()).Slice()
		if err != nil {
			return r, fmt.Errorf("queue: sweep: %w", err)
		}
		if queue.Fenced(out) {
			return r, queue.ErrFenced
		}
		if len(out) < 4 {
			return r, fmt.Errorf("queue: sweep: %d values returned, want 4", len(out))
		}
		r.Dead += queue.ToInt(out[0])
		r.Successes += queue.ToInt(out[1])
		r.Left = r.Left || queue.ToInt(out[2]) != 0
		r.Lag = max(r.Lag, time.Duration(queue.ToInt(out[3]))*time.Millisecond)
	}
	return r, nil
}

// CleanWorkers forgets a pool's dead workers and returns the live figures.
func (s *Maintainer) CleanWorkers(ctx context.Context, f queue.Fence, pool string, cutoff time.Duration) (queue.PoolWorkers, error) {
	p := s.Prefix(0)
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Workers, s.KeysWith(0, queue.FenceKey(s.Prefix(0), f), queue.WorkersKey(p, pool), queue.SlotsKey(p, pool),
		queue.TypesKey(p, pool)), s.Clock(), f.Token, cutoff.Milliseconds()).Slice()
	if err != nil {
		return queue.PoolWorkers{}, fmt.Errorf("queue: clean workers: %w", err)
	}
	if queue.Fenced(out) {
		return queue.PoolWorkers{}, queue.ErrFenced
	}
	pw := queue.PoolWorkers{Removed: queue.ToInt(out[0]), Live: queue.ToInt(out[1]), Slots: queue.ToInt(out[2])}
	if pw.Live == 0 || queue.ToInt(out[3]) != 0 {
		return pw, nil // no worker, or one that may serve any type
	}
	union := map[string]bool{}
	for _, v := range out[4:] {
		for _, t := range queue.SplitTypes(queue.ToStr(v)) {
			union[t] = true
		}
		if len(union) > queue.MaxPoolTypes {
			return pw, nil
		}
	}
	pw.Types = make([]string, 0, len(union))
	for t := range union {
		pw.Types = append(pw.Types, t)
	}
	sort.Strings(pw.Types)
	return pw, nil
}

package maint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// tenantSample bounds the task records a shard's Starving reads per pool
// without a fair share (one pipelined HGET each), only while it starves.
const tenantSample = 256

// Starving counts the tasks of pools waiting longer than threshold, from
// the scores of the sets they wait in, reading no task record: a ready
// set's score is when its task became READY (or due), the due set's when
// its task became due. One pipelined round trip of ZCOUNTs per shard, so
// the leader can afford it every few seconds. A task put back to PENDING
// for want of capacity (NO_CAPACITY) waits in the delayed set, by its next
// try, and is not counted.
func (s *Maintainer) Starving(ctx context.Context, pools []string, threshold time.Duration) (queue.Starving, error) {
	out := queue.Starving{Ready: make(map[string][task.MaxPriority + 1]int, len(pools))}
	before := "(" + strconv.FormatInt(s.Now().Add(-threshold).UnixMilli(), 10)
	for shard := range s.Shards() {
		p := s.Prefix(shard)
		pipe := s.Client().Pipeline()
		ready := make([][task.MaxPriority + 1]*redis.IntCmd, len(pools))
		for i, pool := range pools {
			for prio := 0; prio <= task.MaxPriority; prio++ {
				ready[i][prio] = pipe.ZCount(ctx, queue.ReadyKey(p, pool, prio), "-inf", before)
			}
		}
		due := pipe.ZCount(ctx, queue.DueKey(s.Prefix(shard)), "-inf", before)
		idx := make([]*redis.StringSliceCmd, len(pools))
		for i, pool := range pools {
			idx[i] = pipe.ZRange(ctx, queue.FairIndexKey(p, pool), 0, -1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return queue.Starving{}, fmt.Errorf("queue: starving: %w", err)
		}
		if err := s.starvingTenants(ctx, p, pools, idx, before, &out); err != nil {
			return queue.Starving{}, err
		}
		var plain []string // pools without a fair index on this shard, with starving tasks of 1–4
		var total []int
		for i, pool := range pools {
			n := 0
			for prio := 1; prio <= task.MaxPriority; prio++ {
				n += int(ready[i][prio].Val())
			}
			if n > 0 && len(idx[i].Val()) == 0 {
				plain, total = append(plain, pool), append(total, n)
			}
		}
		if err := s.sampleTenants(ctx, p, plain, total, before, &out); err != nil {
			return queue.Starving{}, err
		}
		for i, pool := range pools {
			a := out.Ready[pool]
			for prio := range a {
				a[prio] += int(ready[i][prio].Val())
			}
			out.Ready[pool] = a
		}
		out.Unplaced += int(due.Val())
	}
	return out, nil
}

// starvingTenants adds the starving tasks of each tenant in the index of a
// fair-share pool (idx: its members on this shard), one more pipelined
// round trip when any pool has one.
func (s *Maintainer) starvingTenants(ctx context.Context, p string, pools []string, idx []*redis.StringSliceCmd, before string, out *queue.Starving) error {
	type cell struct {
		pool, tenant string
		n            [task.MaxPriority]*redis.IntCmd
	}
	var cells []cell
	pipe := s.Client().Pipeline()
	for i, pool := range pools {
		for _, tn := range idx[i].Val() {
			c := cell{pool: pool, tenant: tn}
			for prio := 1; prio <= task.MaxPriority; prio++ {
				c.n[prio-1] = pipe.ZCount(ctx, queue.FairQueueKey(p, pool, prio, tn), "-inf", before)
			}
			cells = append(cells, c)
		}
	}
	if len(cells) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("queue: starving: %w", err)
	}
	if out.Tenants == nil {
		out.Tenants = map[string]map[string]int{}
	}
	for _, c := range cells {
		m := out.Tenants[c.pool]
		if m == nil {
			m = map[string]int{}
			out.Tenants[c.pool] = m
		}
		for _, n := range c.n {
			m[c.tenant] += int(n.Val())
		}
	}
	return nil
}

// sampleTenants adds the starving tasks of each tenant of pools without a
// fair share (total: each pool's starving tasks of priorities 1–4 on this
// shard) from the tenants of its oldest tenantSample of them: two more
// pipelined round trips when any pool starves.
func (s *Maintainer) sampleTenants(ctx context.Context, p string, pools []string, total []int, before string, out *queue.Starving) error {
	if len(pools) == 0 {
		return nil
	}
	pipe := s.Client().Pipeline()
	heads := make([][task.MaxPriority]*redis.ZSliceCmd, len(pools))
	for i, pool := range pools {
		for prio := 1; prio <= task.MaxPriority; prio++ {
			heads[i][prio-1] = pipe.ZRangeByScoreWithScores(ctx, queue.ReadyKey(p, pool, prio),
				&redis.ZRangeBy{Min: "-inf", Max: before, Count: tenantSample})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("queue: starving: %w", err)
	}
	ids := make([][]string, len(pools))
	for i := range pools {
		var all []redis.Z
		for _, h := range heads[i] {
			all = append(all, h.Val()...)
		}
		// the oldest over the priorities
		sort.Slice(all, func(a, b int) bool { return all[a].Score < all[b].Score })
		for _, z := range all[:min(len(all), tenantSample)] {
			ids[i] = append(ids[i], z.Member.(string))
		}
	}
	pipe = s.Client().Pipeline()
	tns := make([][]*redis.StringCmd, len(pools))
	for i := range pools {
		for _, id := range ids[i] {
			tns[i] = append(tns[i], pipe.HGet(ctx, queue.TaskKey(p, id), "tn"))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("queue: starving: %w", err)
	}
	if out.Tenants == nil {
		out.Tenants = map[string]map[string]int{}
	}
	for i, pool := range pools {
		by := map[string]int{}
		for _, c := range tns[i] {
			tn := c.Val()
			if tn == "" {
				tn = "default"
			}
			by[tn]++
		}
		m := out.Tenants[pool]
		if m == nil {
			m = map[string]int{}
			out.Tenants[pool] = m
		}
		n := len(tns[i])
		for tn, k := range by {
			if n < total[i] {
				k = int(math.Round(float64(k) * float64(total[i]) / float64(n)))
			}
			m[tn] += k
		}
	}
	return nil
}

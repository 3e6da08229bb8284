package queue

import (
	"context"
	"fmt"

	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Get returns a task by id.
func (s *Engine) Get(ctx context.Context, id string) (*task.Task, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return nil, err
	}
	h, err := s.rdb.HGetAll(ctx, TaskKey(s.Prefix(shard), id)).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: get: %w", err)
	}
	if len(h) == 0 {
		err := fmt.Errorf("%w: %s", task.ErrNotFound, id)
		if s.ThawedOn(ctx, id, err) {
			return s.Get(ctx, id)
		}
		return nil, err
	}
	t := record.DecodeTask(id, h, s.opts.Defaults)
	t.HeldBy = s.opts.Region
	if err := s.ResolveLazy(ctx, shard, []*task.Task{t}); err != nil {
		return nil, err
	}
	return t, nil
}

// mayBeLazy tells a record that may have been promoted untouched: a pinned
// task submitted with a delay still as submitted (scripts/lib.lua). It is
// READY when it is in its pool's ready set.
func MayBeLazy(t *task.Task) bool {
	return t.State == task.Pending && t.Reason == task.ReasonSubmitted && t.Pinned && t.Pool != "" &&
		t.HandOffTarget == "" && t.DueAt != nil
}

// markLazyReady applies to t what a promotion implies without writing it.
func MarkLazyReady(t *task.Task) {
	t.State, t.Reason = task.Ready, task.ReasonDue
	d := *t.DueAt
	t.ReadyAt, t.EnqueuedAt = &d, &d
}

// ResolveLazy settles the state of records that may have been promoted
// untouched, with one ZSCORE each (one pipeline). A pinned delayed task's
// record keeps st P and rs SUBMITTED after promotion; it is READY while it
// is in its ready set. Every script and read resolves that (lib.lua
// is_lazy/lazy_state, and here); the claim writes the READY step into the
// record.
func (s *Engine) ResolveLazy(ctx context.Context, shard int, ts []*task.Task) error {
	var lazy []*task.Task
	for _, t := range ts {
		if MayBeLazy(t) {
			lazy = append(lazy, t)
		}
	}
	if len(lazy) == 0 {
		return nil
	}
	p := s.Prefix(shard)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.FloatCmd, len(lazy))
	for i, t := range lazy {
		cmds[i] = pipe.ZScore(ctx, ReadyKey(p, t.Pool, t.Priority), t.ID)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return fmt.Errorf("queue: read tasks: %w", err)
	}
	for i, t := range lazy {
		if cmds[i].Err() == nil {
			MarkLazyReady(t)
		}
	}
	return nil
}

// getMany reads several tasks of one shard in one pipeline; missing ones are
// left out.
func (s *Engine) GetMany(ctx context.Context, shard int, ids []string) ([]*task.Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	p := s.Prefix(shard)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, TaskKey(p, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: read tasks: %w", err)
	}
	out := make([]*task.Task, 0, len(ids))
	for i, c := range cmds {
		if h := c.Val(); len(h) > 0 {
			t := record.DecodeTask(ids[i], h, s.opts.Defaults)
			t.HeldBy = s.opts.Region
			out = append(out, t)
		}
	}
	if err := s.ResolveLazy(ctx, shard, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Counts are a region's O(1) counters.
type Counts struct {
	Pending, Ready, Running, Dead int
	// Held: received hand-offs waiting for their sender's word (counted in
	// Pending too).
	Held int
	// Cumulative terminal transitions since the store began.
	Succeeded, Canceled, Failed int
	// ReadyBy[pool][priority]; RunningBy[pool], MilliBy[pool] the milli-slots they hold.
	ReadyBy            map[string][task.MaxPriority + 1]int
	RunningBy, MilliBy map[string]int
	// ParkedBy[pool]: READY tasks set aside by a limit (counted in ReadyBy
	// too); LimitedBy[pool][kind]: parkings since the store began, by kind
	// (rate, concurrency, paused).
	ParkedBy  map[string]int
	LimitedBy map[string]map[string]int
	// FairStale: claims of a pool whose fair-share tenant sets were marked
	// exact that met stale entries all the same, since the store began
	// (docs/fairness.md "Keeping the index right"): a server removing
	// lazily (an older ax during an upgrade) or a defect.
	FairStale int
}

// ReadyIn is the number of READY tasks of a pool over all priorities.
func (c *Counts) ReadyIn(pool string) int {
	n := 0
	for _, v := range c.ReadyBy[pool] {
		n += v
	}
	return n
}

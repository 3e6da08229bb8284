package queue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
)

// SlowLane keeps one pool's slow tasks to a share of its slots
// (docs/fairness.md): a task of a slow type starts only while fewer than
// Slots of them run in the region's pool, so quick tasks keep flowing
// behind a flood of slow ones. Past the lane a slow task waits READY,
// parked (SLOW_LANE_FULL in its trail, no retry spent), until a slow task
// ends.
type SlowLane struct {
	// Threshold: a type whose learnt run time is at least this is slow,
	// and so is one with a task RUNNING for longer (its heartbeat says so
	// at once, before any of them ended).
	Threshold time.Duration
	// Slots is how many slow tasks the pool runs at once (at least 1).
	Slots int
	// Slow are the types the learnt run times put past Threshold; Known
	// every type with a learnt run time: a type known and not slow is
	// quick again even if a heartbeat marked it.
	Slow, Known []string
}

// SetSlowLanes replaces the region's slow lanes, by pool (leader only).
// Each shard keeps its part of every lane's slots (at least 1: a task's
// shard is chosen at submit). A pool left out has none.
func (s *Store) SetSlowLanes(ctx context.Context, f Fence, lanes map[string]SlowLane) error {
	names := slices.Sorted(maps.Keys(lanes))
	for shard := range s.keys {
		argv := []any{s.clock(), f.Token, len(names)}
		for _, p := range names {
			l := lanes[p]
			argv = append(argv, p, max(l.Threshold.Milliseconds(), 1), splitSlots(max(l.Slots, 1), shard, s.opts.Shards), len(l.Slow))
			for _, t := range l.Slow {
				argv = append(argv, t)
			}
			argv = append(argv, len(l.Known))
			for _, t := range l.Known {
				argv = append(argv, t)
			}
		}
		out, err := s.run(ctx, s.rdb, scripts.slowLane, s.keysWith(shard, s.fenceKey(shard, f)), argv...).Slice()
		if err != nil {
			return fmt.Errorf("queue: set slow lanes: %w", err)
		}
		if fenced(out) {
			return ErrFenced
		}
	}
	return nil
}

// SlowLaneStatus is a pool's slow lane now, summed over the shards: its
// slow tasks RUNNING and those parked until it has room.
func (s *Store) SlowLaneStatus(ctx context.Context, pool string) (LimitState, error) {
	return s.keyStatus(ctx, "w:"+pool)
}

// SlowTypes are the types slow in pool's lane on any shard, sorted.
func (s *Store) SlowTypes(ctx context.Context, pool string) ([]string, error) {
	seen := map[string]bool{}
	for shard := range s.keys {
		ts, err := s.rdb.HKeys(ctx, s.keys[shard].prefix+"slt:"+pool).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: slow types: %w", err)
		}
		for _, t := range ts {
			seen[t] = true
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

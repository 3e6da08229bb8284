package queue

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// FairShare is how one pool's slots are shared among tenants
// (docs/fairness.md): each tenant gets slots in proportion to its weight,
// first up to its floor (slots no other tenant's work takes while it has
// work waiting) and never more than its max (0: no ceiling). Slots a
// tenant leaves idle go to the others.
type FairShare struct {
	// DefaultWeight weighs every tenant not in Tenants (0: 1).
	DefaultWeight float64
	Tenants       map[string]TenantShare
}

// TenantShare is one tenant's part of a pool's fair share.
type TenantShare struct {
	Weight     float64 // 0: the pool's default weight
	Floor, Max int     // slots; 0: none
}

// splitSlots is shard i's part of v slots over n shards: the largest
// remainder, at least 1 (as limits split, shardShare).
func splitSlots(v, i, n int) int {
	if v <= 0 {
		return 0
	}
	s := v / n
	if i < v%n {
		s++
	}
	return max(s, 1)
}

func weightMilli(w, def float64) int64 {
	if w <= 0 {
		w = def
	}
	if w <= 0 {
		w = 1
	}
	return max(int64(math.Round(w*1000)), 1)
}

// SetFairShare replaces the region's fair shares, by pool (leader only).
// Each shard keeps its part of every floor and max (a task's shard is
// chosen at submit); weights are the same on every shard. A pool left out
// has none: claims take its tasks as before, at no extra cost.
func (s *Store) SetFairShare(ctx context.Context, f Fence, pools map[string]FairShare) error {
	names := slices.Sorted(maps.Keys(pools))
	for shard := range s.keys {
		argv := []any{s.clock(), f.Token, len(names)}
		for _, p := range names {
			fs := pools[p]
			tenants := slices.Sorted(maps.Keys(fs.Tenants))
			argv = append(argv, p, len(tenants)+1, "*", fmt.Sprintf("%d 0 0", weightMilli(fs.DefaultWeight, 1)))
			for _, t := range tenants {
				ts := fs.Tenants[t]
				argv = append(argv, t, fmt.Sprintf("%d %d %d", weightMilli(ts.Weight, fs.DefaultWeight),
					splitSlots(ts.Floor, shard, s.opts.Shards), splitSlots(ts.Max, shard, s.opts.Shards)))
			}
		}
		out, err := s.run(ctx, s.rdb, scripts.fairShare, s.keysWith(shard, s.fenceKey(shard, f)), argv...).Slice()
		if err != nil {
			return fmt.Errorf("queue: set fair share: %w", err)
		}
		if fenced(out) {
			return ErrFenced
		}
	}
	return nil
}

// FairRunning is how many tasks each tenant runs in pool under its fair
// share, over every shard (tests, tools).
func (s *Store) FairRunning(ctx context.Context, pool string) (map[string]int, error) {
	out := map[string]int{}
	for shard := range s.keys {
		m, err := s.rdb.HGetAll(ctx, s.keys[shard].prefix+"fr:"+pool).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: fair running: %w", err)
		}
		for t, v := range m {
			if strings.HasPrefix(t, "~") || strings.HasPrefix(t, "^") || t == "!" {
				continue // starts ÷ weight (ties), priority masks, exact sets
			}
			n, _ := strconv.Atoi(v)
			out[t] += n
		}
	}
	return out, nil
}

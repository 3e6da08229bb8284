package queue

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ax-sched/ax/task"
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
// chosen at submit); weights are the same on every shard. A floor or max
// of at least the shard count is split evenly (the remainder to the first
// shards); a smaller one (a max of 1 on 3 masters) would allow one per
// shard, so its parts add up to it and follow the tenant's work each time
// shares are written (FairShareMoves says when to write again), as a slow
// lane's slots do: first to the shards running the tenant's tasks (as many
// as they run), then one to each shard where it has tasks waiting (turn by
// turn), the rest to the first shards; a max's parts are taken away
// before they are given elsewhere, so the tenant never runs more than its
// max while they move. A pool left out has none: claims take its tasks as
// before, at no extra cost.
func (s *Store) SetFairShare(ctx context.Context, f Fence, pools map[string]FairShare) error {
	names := slices.Sorted(maps.Keys(pools))
	n := s.opts.Shards
	var items []fairItem
	for _, p := range names {
		for _, t := range slices.Sorted(maps.Keys(pools[p].Tenants)) {
			items = append(items, fairItem{p, t, pools[p].Tenants[t]})
		}
	}
	floor, maxes := make([][]int, n), make([][]int, n) // shard → part, in items' order
	for shard := range n {
		floor[shard], maxes[shard] = make([]int, len(items)), make([]int, len(items))
		for j, it := range items {
			floor[shard][j], maxes[shard][j] = splitSlots(it.share.Floor, shard, n), splitSlots(it.share.Max, shard, n)
		}
	}
	below := func(v int) bool { return v > 0 && v < n }
	var moving, movingMax []int
	for j, it := range items {
		if below(it.share.Floor) || below(it.share.Max) {
			moving = append(moving, j)
		}
		if below(it.share.Max) {
			movingMax = append(movingMax, j)
		}
	}
	write := func(shard int, mx []int) ([]int, error) {
		return s.writeFairShare(ctx, f, shard, names, pools, items, floor[shard], mx)
	}
	if len(moving) > 0 {
		now, err := s.fairShards(ctx, items, moving)
		if err != nil {
			return err
		}
		turn := int(s.now().Unix() % int64(n))
		place := func(v, j int, parts [][]int) {
			if below(v) {
				want := placeLane(v, now, j, turn)
				for shard := range n {
					parts[shard][j] = want[shard]
				}
			}
		}
		for _, j := range moving {
			place(items[j].share.Floor, j, floor)
			place(items[j].share.Max, j, maxes)
		}
		total := func(j int) int { return items[j].share.Max }
		if err := moveParts(movingMax, total, maxes, now, write); err != nil {
			return err
		}
	}
	for shard := range n {
		if _, err := write(shard, maxes[shard]); err != nil {
			return err
		}
	}
	return nil
}

// fairItem is one tenant named in a pool's fair share.
type fairItem struct {
	pool, tenant string
	share        TenantShare
}

// FairShareMoves tells the leader to write fair shares at every round, not
// only when they change: some floor or max is smaller than the store's
// shard count, and its parts follow the tenant's work (SetFairShare).
func (s *Store) FairShareMoves(pools map[string]FairShare) bool {
	for _, fs := range pools {
		for _, ts := range fs.Tenants {
			if ts.Floor > 0 && ts.Floor < s.opts.Shards || ts.Max > 0 && ts.Max < s.opts.Shards {
				return true
			}
		}
	}
	return false
}

// fairPart encodes one shard's part of a tenant's share for fs:<pool>:
// "weight_milli floor max", and for a max of which this shard's part is
// none for now "weight_milli floor 1 z" (lib.lua fair reads 0; a server of
// an older ax, during an upgrade, 1 as it always had).
func fairPart(w int64, floor, mx int, share TenantShare) string {
	if share.Max > 0 && mx == 0 {
		return fmt.Sprintf("%d %d 1 z", w, floor)
	}
	return fmt.Sprintf("%d %d %d", w, floor, mx)
}

// writeFairShare writes one shard's fair shares with the given parts (by
// items' index) and returns what each item's tenant runs in its pool on
// the shard after it.
func (s *Store) writeFairShare(ctx context.Context, f Fence, shard int, names []string, pools map[string]FairShare, items []fairItem, floor, mx []int) ([]int, error) {
	argv := []any{s.clock(), f.Token, len(names)}
	j := 0
	for _, p := range names {
		fs := pools[p]
		argv = append(argv, p, len(fs.Tenants)+1, "*", fmt.Sprintf("%d 0 0", weightMilli(fs.DefaultWeight, 1)))
		for ; j < len(items) && items[j].pool == p; j++ {
			it := items[j]
			argv = append(argv, it.tenant, fairPart(weightMilli(it.share.Weight, fs.DefaultWeight), floor[j], mx[j], it.share))
		}
	}
	return s.writeParts(ctx, scripts.fairShare, "set fair share", f, shard, argv, 2, len(items))
}

// fairShards reads each shard's part of the moving items now: the max part
// it holds, the tasks of the tenant it runs in the pool and those waiting.
func (s *Store) fairShards(ctx context.Context, items []fairItem, moving []int) ([]laneShard, error) {
	where := func(p string, j int) partKeys {
		it := items[j]
		k := partKeys{part: p + "fs:" + it.pool, partField: it.tenant, run: p + "fr:" + it.pool, runField: it.tenant}
		for pr := 1; pr <= task.MaxPriority; pr++ {
			k.waiting = append(k.waiting, fmt.Sprintf("%sfq:%s:%d:%s", p, it.pool, pr, it.tenant))
		}
		return k
	}
	return s.shardParts(ctx, len(items), moving, where, movedPart)
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

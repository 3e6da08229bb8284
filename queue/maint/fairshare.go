package maint

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ax-sched/ax/queue"
	"github.com/redis/go-redis/v9"
)

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
// Weights are the same on every shard. With several shards each keeps its
// part of every floor and max (a task's shard is chosen at submit, and a
// hand-off keeps its id, so its shard), the parts adding up to the figure,
// and they follow the tenant's work each time shares are written
// (FairShareMoves: every leader round), by what the tenant runs and has
// waiting in the pool on each shard (placeDemand): a tenant whose work is
// all on one shard has its whole floor and max there. A max's parts are
// taken away before they are given elsewhere, so the tenant never runs
// more than its max while they move. A pool left out has none: claims
// take its tasks as before, at no extra cost.
func (s *Maintainer) SetFairShare(ctx context.Context, f queue.Fence, pools map[string]queue.FairShare) error {
	names := slices.Sorted(maps.Keys(pools))
	n := s.Shards()
	var items []fairItem
	for _, p := range names {
		for _, t := range slices.Sorted(maps.Keys(pools[p].Tenants)) {
			items = append(items, fairItem{p, t, pools[p].Tenants[t]})
		}
	}
	floor, maxes := make([][]int, n), make([][]int, n) // shard → part, in items' order
	for shard := range n {
		floor[shard], maxes[shard] = make([]int, len(items)), make([]int, len(items))
	}
	var moving, movingMax []int // with several shards: every floor or max
	for j, it := range items {
		if n == 1 {
			floor[0][j], maxes[0][j] = it.share.Floor, it.share.Max
			continue
		}
		if it.share.Floor > 0 || it.share.Max > 0 {
			moving = append(moving, j)
		}
		if it.share.Max > 0 {
			movingMax = append(movingMax, j)
		}
	}
	var now []laneShard
	var held []fairHeld // what the shards hold now, nil: not read
	write := func(shard int, mx []int) ([]int, error) {
		argv, fields := s.fairArgv(f, names, pools, items, floor[shard], mx)
		if held != nil && held[shard].same(fields) {
			// nothing to change: what it runs, as read before (a part not
			// lowered never lets it run more than it or what it ran then)
			return now[shard].running, nil
		}
		run, err := s.writeParts(ctx, queue.Scripts.FairShare, "set fair share", f, shard, argv, 2, len(items))
		if err == nil && held != nil {
			held[shard] = fairHeld{pools: fields}
		}
		return run, err
	}
	if len(moving) > 0 {
		var err error
		if now, held, err = s.fairShards(ctx, names, items, moving); err != nil {
			return err
		}
		turn := int(s.Now().Unix() % int64(n))
		place := func(v, j int, parts [][]int) {
			if v > 0 {
				want := placeDemand(v, now, j, turn)
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
	share        queue.TenantShare
}

// FairShareMoves tells the leader to write fair shares at every round, not
// only when they change: with several shards some floor or max has parts
// that follow the tenant's work (SetFairShare).
func (s *Maintainer) FairShareMoves(pools map[string]queue.FairShare) bool {
	if s.Shards() == 1 {
		return false
	}
	for _, fs := range pools {
		for _, ts := range fs.Tenants {
			if ts.Floor > 0 || ts.Max > 0 {
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
func fairPart(w int64, floor, mx int, share queue.TenantShare) string {
	if share.Max > 0 && mx == 0 {
		return fmt.Sprintf("%d %d 1 z", w, floor)
	}
	return fmt.Sprintf("%d %d %d", w, floor, mx)
}

// fairArgv is fairshare.lua's ARGV for one shard's parts (by items'
// index), and the fs hash of each pool it writes.
func (s *Maintainer) fairArgv(f queue.Fence, names []string, pools map[string]queue.FairShare, items []fairItem, floor, mx []int) ([]any, map[string]map[string]string) {
	argv := []any{s.Clock(), f.Token, len(names)}
	fields := make(map[string]map[string]string, len(names))
	j := 0
	for _, p := range names {
		fs := pools[p]
		h := map[string]string{"*": fmt.Sprintf("%d 0 0", weightMilli(fs.DefaultWeight, 1))}
		argv = append(argv, p, len(fs.Tenants)+1, "*", h["*"])
		for ; j < len(items) && items[j].pool == p; j++ {
			it := items[j]
			h[it.tenant] = fairPart(weightMilli(it.share.Weight, fs.DefaultWeight), floor[j], mx[j], it.share)
			argv = append(argv, it.tenant, h[it.tenant])
		}
		fields[p] = h
	}
	return argv, fields
}

// fairHeld is what a shard holds of the fair shares: each pool's fs hash,
// and no pool besides (fsp).
type fairHeld struct {
	pools map[string]map[string]string
}

// same reports whether writing fields would change nothing.
func (h fairHeld) same(fields map[string]map[string]string) bool {
	if len(h.pools) != len(fields) {
		return false
	}
	for p, f := range fields {
		if !maps.Equal(h.pools[p], f) {
			return false
		}
	}
	return true
}

// fairShards reads each shard's part of the moving items now: the max part
// it holds, the tasks of the tenant it runs in the pool and those waiting;
// and what it holds of every pool's fair share (fairHeld). One pipeline
// for every shard (a Cluster client sends each master its part at once):
// per shard its pools (SMEMBERS) and per pool its parts (HGETALL) and one
// HMGET of the moving tenants' running counts and priority masks; then
// one ZCARD per tenant set a mask names (all four for a tenant with none:
// indexed before masks).
func (s *Maintainer) fairShards(ctx context.Context, names []string, items []fairItem, moving []int) ([]laneShard, []fairHeld, error) {
	n := len(items)
	byPool := map[string][]int{}
	for _, j := range moving {
		byPool[items[j].pool] = append(byPool[items[j].pool], j)
	}
	out := make([]laneShard, s.Shards())
	held := make([]fairHeld, s.Shards())
	type read struct {
		shard int
		pool  string
		parts *redis.MapStringStringCmd
		run   *redis.SliceCmd
	}
	var reads []read
	set := make([]*redis.StringSliceCmd, s.Shards())
	pipe := s.Client().Pipeline()
	for shard := range out {
		out[shard] = laneShard{slots: make([]int, n), running: make([]int, n), parked: make([]int, n)}
		pre := s.Prefix(shard)
		set[shard] = pipe.SMembers(ctx, queue.FairPoolsKey(pre))
		for _, p := range names {
			r := read{shard: shard, pool: p, parts: pipe.HGetAll(ctx, queue.FairPartsKey(pre, p))}
			if js := byPool[p]; len(js) > 0 {
				fields := make([]string, 0, 2*len(js))
				for _, j := range js {
					fields = append(fields, items[j].tenant, "^"+items[j].tenant)
				}
				r.run = pipe.HMGet(ctx, queue.FairRunningKey(pre, p), fields...)
			}
			reads = append(reads, r)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("queue: fair shares' parts: %w", err)
	}
	for shard := range held {
		held[shard].pools = map[string]map[string]string{}
		for _, p := range set[shard].Val() {
			held[shard].pools[p] = nil // a pool to remove: never the same
		}
	}
	type card struct {
		shard, j int
		n        *redis.IntCmd
	}
	var cards []card
	pipe = s.Client().Pipeline()
	for _, r := range reads {
		parts := r.parts.Val()
		if _, ok := held[r.shard].pools[r.pool]; ok && len(parts) > 0 {
			held[r.shard].pools[r.pool] = parts
		}
		if r.run == nil {
			continue
		}
		run := r.run.Val()
		for k, j := range byPool[r.pool] {
			if v, ok := parts[items[j].tenant]; ok {
				out[r.shard].slots[j] = queue.MovedPart(v)
			}
			if v, ok := run[2*k].(string); ok {
				// milli-slots: the whole slots they fill, rounded up
				m, _ := strconv.Atoi(v)
				out[r.shard].running[j] = (m + 999) / 1000
			}
			mask, ok := run[2*k+1].(string)
			if !ok {
				mask = "1234"
			}
			for _, pr := range mask {
				key := fmt.Sprintf("%sfq:%s:%c:%s", s.Prefix(r.shard), r.pool, pr, items[j].tenant)
				cards = append(cards, card{r.shard, j, pipe.ZCard(ctx, key)})
			}
		}
	}
	if len(cards) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, nil, fmt.Errorf("queue: fair shares' parts: %w", err)
		}
		for _, c := range cards {
			out[c.shard].parked[c.j] += int(c.n.Val())
		}
	}
	return out, held, nil
}

// FairRunning is how many slots each tenant's tasks running in pool under
// its fair share hold, in milli-slots (a whole slot is 1000), over every
// shard (tests, tools).
func (s *Maintainer) FairRunning(ctx context.Context, pool string) (map[string]int, error) {
	out := map[string]int{}
	for shard := range s.Shards() {
		m, err := s.Client().HGetAll(ctx, queue.FairRunningKey(s.Prefix(shard), pool)).Result()
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

package maint

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ax-sched/ax/queue"
	"github.com/redis/go-redis/v9"
)

// SetSlowLanes replaces the region's slow lanes, by pool (leader only).
// A task's shard is chosen at submit and a claim sees its own shard only,
// so with several shards each keeps a part of every lane's slots, and the
// parts add up to the lane's slots, never more. They follow the slow work
// each time the lanes are written (SlowLanesMove: every leader round), by
// each shard's slow tasks running and parked (placeDemand), so slow tasks
// all on one shard (hand-offs keep their ids, and so their shard) get the
// lane's slots there. Slots are taken away before they are given
// elsewhere, so the lane holds no more than its slots while they move. A
// pool left out has none.
func (s *Maintainer) SetSlowLanes(ctx context.Context, f queue.Fence, lanes map[string]queue.SlowLane) error {
	names := slices.Sorted(maps.Keys(lanes))
	n := s.Shards()
	caps := make([][]int, n) // shard → slots, in names' order
	for shard := range caps {
		caps[shard] = make([]int, len(names))
	}
	slots := func(j int) int { return max(lanes[names[j]].Slots, 1) }
	var moving []int // every lane, with several shards
	for j := range names {
		if n == 1 {
			caps[0][j] = slots(j)
		} else {
			moving = append(moving, j)
		}
	}
	if len(moving) > 0 {
		now, err := s.laneShards(ctx, names, moving)
		if err != nil {
			return err
		}
		turn := int(s.Now().Unix() % int64(n))
		for _, j := range moving {
			want := placeDemand(slots(j), now, j, turn)
			for shard := range n {
				caps[shard][j] = want[shard]
			}
		}
		write := func(shard int, caps []int) ([]int, error) {
			return s.writeLanes(ctx, f, shard, names, lanes, caps)
		}
		if err := moveParts(moving, slots, caps, now, write); err != nil {
			return err
		}
	}
	for shard := range n {
		if _, err := s.writeLanes(ctx, f, shard, names, lanes, caps[shard]); err != nil {
			return err
		}
	}
	return nil
}

// SlowLanesMove tells the leader to write lanes at every round, not only
// when they change: with several shards a lane's slots follow the shards'
// slow work (SetSlowLanes).
func (s *Maintainer) SlowLanesMove(lanes map[string]queue.SlowLane) bool {
	return s.Shards() > 1 && len(lanes) > 0
}

// laneShard is one shard's part of the moving lanes (or limits), by
// index: the slots it has now, the tasks it runs and those parked.
type laneShard struct{ slots, running, parked []int }

// writeParts runs a fenced leader script on shard that answers, from
// out[first] on, what each of its n items runs there after it.
func (s *Maintainer) writeParts(ctx context.Context, sc *queue.Script, what string, f queue.Fence, shard int, argv []any, first, n int) ([]int, error) {
	out, err := s.Run(ctx, s.Client(), sc, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f)), argv...).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: %s: %w", what, err)
	}
	if queue.Fenced(out) {
		return nil, queue.ErrFenced
	}
	return countsFrom(out, first, n), nil
}

// countsFrom reads n counts a leader script returned from out[first] on
// (0 for any it did not return).
func countsFrom(out []any, first, n int) []int {
	c := make([]int, n)
	for j := range c {
		if first+j < len(out) {
			v, _ := out[first+j].(int64)
			c[j] = int(v)
		}
	}
	return c
}

// moveParts moves the parts of the items in moving (indexes of caps'
// columns: caps[shard][j] is shard's wanted part of item j) without the
// shards ever holding more of an item than its total while they move:
// every shard is written first with min(its part now, its wanted one) —
// write says what each item runs on the shard after it — and only what is
// left of the total, past those parts and what runs, is given to the
// shards that want more. caps ends with the parts to write last.
func moveParts(moving []int, total func(j int) int, caps [][]int, now []laneShard, write func(shard int, caps []int) ([]int, error)) error {
	n := len(caps)
	lower := make([][]int, n)
	for shard := range n {
		lower[shard] = slices.Clone(caps[shard])
		for _, j := range moving {
			lower[shard][j] = min(caps[shard][j], now[shard].slots[j])
		}
	}
	running := make([][]int, n)
	for shard := range n {
		r, err := write(shard, lower[shard])
		if err != nil {
			return err
		}
		running[shard] = r
	}
	for _, j := range moving {
		held := 0
		for shard := range n {
			held += max(lower[shard][j], running[shard][j])
		}
		free := total(j) - held
		for shard := range n {
			give := min(max(caps[shard][j]-lower[shard][j], 0), max(free, 0))
			free -= give
			caps[shard][j] = lower[shard][j] + give
		}
	}
	return nil
}

func (s *Maintainer) laneShards(ctx context.Context, names []string, moving []int) ([]laneShard, error) {
	where := func(p string, j int) partKeys {
		k := "w:" + names[j]
		return partKeys{part: queue.SlowLanesKey(p), partField: names[j], run: queue.LimitRunningKey(p), runField: k, waiting: []string{queue.ParkedKey(p, k)}}
	}
	slots := func(v string) int { // "threshold_ms slots"
		_, c, _ := strings.Cut(v, " ")
		n, _ := strconv.Atoi(c)
		return n
	}
	return s.shardParts(ctx, len(names), moving, where, slots)
}

// partKeys says where one shard keeps a moving item: its part (a hash
// field), what it runs (a hash field) and the ZSETs of its tasks waiting.
type partKeys struct {
	part, partField, run, runField string
	waiting                        []string
}

// shardParts reads every shard's part of the moving items (of n): one
// pipeline a shard; part parses the part's value.
func (s *Maintainer) shardParts(ctx context.Context, n int, moving []int, where func(prefix string, j int) partKeys, part func(string) int) ([]laneShard, error) {
	out := make([]laneShard, s.Shards())
	for shard := range out {
		pipe := s.Client().Pipeline()
		type reads struct {
			part, run *redis.StringCmd
			waiting   []*redis.IntCmd
		}
		rs := map[int]*reads{}
		for _, j := range moving {
			k := where(s.Prefix(shard), j)
			r := &reads{part: pipe.HGet(ctx, k.part, k.partField), run: pipe.HGet(ctx, k.run, k.runField)}
			for _, w := range k.waiting {
				r.waiting = append(r.waiting, pipe.ZCard(ctx, w))
			}
			rs[j] = r
		}
		_, _ = pipe.Exec(ctx) // HGET of an absent field is redis.Nil: read each answer
		ls := laneShard{slots: make([]int, n), running: make([]int, n), parked: make([]int, n)}
		for j, r := range rs {
			for _, w := range r.waiting {
				if err := w.Err(); err != nil {
					return nil, fmt.Errorf("queue: shards' parts: %w", err)
				}
				ls.parked[j] += int(w.Val())
			}
			if v, err := r.part.Result(); err == nil {
				ls.slots[j] = part(v)
			}
			ls.running[j], _ = strconv.Atoi(r.run.Val())
		}
		out[shard] = ls
	}
	return out, nil
}

// placeDemand shares total (a lane's slots, a floor or a max) out on the
// shards' work in item j, so that the parts add up to total and follow
// it: first to each shard as many as it runs (in proportion to that, by
// the largest remainder, when they run more than total: a floor), then
// the rest on the tasks waiting: each shard as many as wait there when
// that is enough, the rest evenly (the remainder to the first shards);
// else one to each shard with tasks waiting (turn by turn from shard turn
// when there are fewer than those) and what is left in proportion to
// what waits there past that one, by the largest remainder. A shard keeps
// what its running tasks hold, so the parts of a max or a lane add up to
// it while it is never exceeded (moveParts).
func placeDemand(total int, sh []laneShard, j, turn int) []int {
	n := len(sh)
	run, wait := make([]int, n), make([]int, n)
	ran, waiting, with := 0, 0, 0
	for i := range n {
		run[i], wait[i] = sh[i].running[j], sh[i].parked[j]
		ran += run[i]
		waiting += wait[i]
		if wait[i] > 0 {
			with++
		}
	}
	if ran >= total {
		return byRemainder(total, run, make([]int, n), fromTurn(turn, n))
	}
	rest := total - ran
	switch {
	case waiting <= rest:
		for i := range n {
			run[i] += wait[i] + (rest-waiting)/n
			if i < (rest-waiting)%n {
				run[i]++
			}
		}
		return run
	case rest < with:
		for k := 0; k < n && rest > 0; k++ {
			if i := (turn + k) % n; wait[i] > 0 {
				run[i]++
				rest--
			}
		}
		return run
	}
	for i := range n {
		if wait[i] > 0 {
			run[i]++
			wait[i]--
		}
	}
	return byRemainder(rest-with, wait, run, fromTurn(turn, n))
}

// byRemainder adds v to out in proportion to weights (of the shards in
// ties; not all 0 when v > 0), by the largest remainder, equal remainders
// to the earlier in ties. v × weight may exceed the type (a rate of 1e9/s
// is 1e12 milli-tasks): the products are 128-bit.
func byRemainder[T ~int | ~int64](v T, weights, out []T, ties []int) []T {
	var sum T
	for _, i := range ties {
		sum += weights[i]
	}
	if v <= 0 || sum == 0 {
		return out
	}
	left := v
	rem := make([]uint64, len(weights))
	for _, i := range ties {
		hi, lo := bits.Mul64(uint64(v), uint64(weights[i]))
		q, r := bits.Div64(hi, lo, uint64(sum))
		out[i] += T(q)
		left -= T(q)
		rem[i] = r
	}
	order := slices.Clone(ties)
	sort.SliceStable(order, func(a, b int) bool { return rem[order[a]] > rem[order[b]] })
	for _, i := range order[:left] {
		out[i]++
	}
	return out
}

// fromTurn is every shard of n, from shard turn on.
func fromTurn(turn, n int) []int {
	order := make([]int, n)
	for k := range order {
		order[k] = (turn + k) % n
	}
	return order
}

// laneField is a lane type as slt:<pool> keeps it (lib.lua slow_type),
// "<type> <tenant>": types and tenants hold no space.
func laneField(t queue.LaneType) string { return t.Type + " " + cmp.Or(t.Tenant, "default") }

// writeLanes writes one shard's lanes with the given slots (by names'
// index) and returns what each lane runs on the shard after it.
func (s *Maintainer) writeLanes(ctx context.Context, f queue.Fence, shard int, names []string, lanes map[string]queue.SlowLane, slots []int) ([]int, error) {
	argv := []any{s.Clock(), f.Token, len(names)}
	for j, p := range names {
		l := lanes[p]
		argv = append(argv, p, max(l.Threshold.Milliseconds(), 1), slots[j], len(l.Slow))
		for _, t := range l.Slow {
			argv = append(argv, laneField(t))
		}
		argv = append(argv, len(l.Known))
		for _, t := range l.Known {
			argv = append(argv, laneField(t))
		}
	}
	return s.writeParts(ctx, queue.Scripts.SlowLane, "set slow lanes", f, shard, argv, 1, len(names))
}

package maint

import (
	"context"
	"fmt"
	"sort"

	"github.com/ax-sched/ax/queue"
)

// SetLimits replaces the region's limits (leader only); buckets, running
// counts, pauses and parked tasks carry over. A task's shard is fixed at
// submit and each shard enforces its own part of every limit, so over
// several shards the parts of a key's rate, burst and concurrency add up
// to the region's figures and follow the key's work each time limits are
// written (LimitsMove: every leader round): in proportion to what each
// shard runs and has parked (followWork). Parts are taken away before
// they are given elsewhere, tokens with them (moveLimits), so the region
// never runs more than its concurrency, nor holds more rate, burst or
// tokens than its figures, while they move. One shard holds the figures.
func (s *Maintainer) SetLimits(ctx context.Context, f queue.Fence, limits []queue.Limit) error {
	keys := make([]string, 0, len(limits))
	by := make(map[string]queue.Limit, len(limits))
	for _, l := range limits {
		k, err := queue.KeyOfLimit(l.Kind, l.Name)
		if err != nil {
			return err
		}
		if l.Rate <= 0 && l.Concurrency <= 0 && !l.Closed {
			continue
		}
		if _, dup := by[k]; !dup {
			keys = append(keys, k)
		}
		by[k] = l
	}
	sort.Strings(keys)
	ls := make([]queue.Limit, len(keys))
	for j, k := range keys {
		ls[j] = by[k]
	}
	n := s.Shards()
	if n == 1 {
		whole := make([]queue.SharePart, len(keys))
		for j, l := range ls {
			whole[j].Rate, whole[j].Burst = queue.LimitFigures(l)
			whole[j].Conc = l.Concurrency
		}
		_, _, err := s.writeLimits(ctx, f, 0, keys, ls, whole, nil)
		return err
	}
	now, stored, err := s.limitDemand(ctx, keys)
	if err != nil {
		return err
	}
	turn := int(s.Now().Unix() % int64(n))
	want := make([][]queue.SharePart, n)
	for shard := range n {
		want[shard] = make([]queue.SharePart, len(keys))
	}
	col := make([]queue.SharePart, n)
	for j, l := range ls {
		for shard := range n {
			col[shard] = now[shard][j]
		}
		for shard, p := range followWork(l, col, turn) {
			want[shard][j] = p
		}
	}
	return s.moveLimits(ctx, f, keys, ls, now, stored, want)
}

// LimitsMove tells the leader to write limits at every round, not only
// when they change: the store has several shards, and the parts of every
// limit follow the shards' work (SetLimits).
func (s *Maintainer) LimitsMove(limits []queue.Limit) bool {
	if s.Shards() < 2 {
		return false
	}
	for _, l := range limits {
		if l.Rate > 0 || l.Concurrency > 0 || l.Closed {
			return true
		}
	}
	return false
}

// followWork shares a limit's figures out on the shards (sh: each one's
// part now, what it runs and has parked): to the shards with work of the
// key — running, parked, or a bucket spent within a refill — one each
// first, as many shards as every figure allows one each (those running
// tasks first, then from shard turn on, so that a figure smaller than the
// shards with work gives each its turn), the rest in proportion to their
// work by largest remainder. Shards without work get none. With no work
// anywhere the parts stay where they are, or, when they do not add up to
// the figures (new, changed), are shared as if every shard had work.
func followWork(l queue.Limit, sh []queue.SharePart, turn int) []queue.SharePart {
	n := len(sh)
	rate, burst := queue.LimitFigures(l)
	work := make([]int64, n)
	worked := false
	for i, p := range sh {
		work[i] = int64(p.Running + p.Parked)
		if p.Busy {
			work[i]++
		}
		worked = worked || work[i] > 0
	}
	if !worked {
		if partsHold(l, sh) {
			out := make([]queue.SharePart, n)
			for i, p := range sh {
				out[i] = queue.SharePart{Rate: p.Rate, Burst: p.Burst, Conc: p.Conc}
			}
			return out
		}
		for i := range work {
			work[i] = 1
		}
		turn = 0 // the first shards take what does not divide, as ever
	}
	var order []int
	for i := range n {
		if work[i] > 0 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, rb := sh[order[a]].Running, sh[order[b]].Running
		if ra != rb {
			return ra > rb
		}
		return (order[a]-turn+n)%n < (order[b]-turn+n)%n
	})
	m := int64(len(order))
	if l.Concurrency > 0 {
		m = min(m, int64(l.Concurrency))
	}
	if rate > 0 {
		m = min(m, int64(burst), rate)
	}
	order = order[:m]
	out := make([]queue.SharePart, n)
	conc := apportion(int64(l.Concurrency), order, work)
	bursts := apportion(int64(burst), order, work)
	rates := apportion(rate, order, work)
	for i := range n {
		out[i] = queue.SharePart{Rate: rates[i], Burst: int(bursts[i]), Conc: int(conc[i])}
	}
	return out
}

// apportion shares total out on the shards of order (at most total of
// them): one each, the rest in proportion to work by largest remainder,
// ties to the earlier in order. 0 shares nothing.
func apportion(total int64, order []int, work []int64) []int64 {
	out := make([]int64, len(work))
	if total <= 0 || len(order) == 0 {
		return out
	}
	w := make([]int64, len(work)) // the work of order's shards alone
	for _, i := range order {
		out[i], w[i] = 1, work[i]
	}
	return byRemainder(total-int64(len(order)), w, out, order)
}

// partsHold reports whether the shards' parts add up to the limit's
// figures, every shard holding a part of each figure or of none.
func partsHold(l queue.Limit, sh []queue.SharePart) bool {
	rate, burst := queue.LimitFigures(l)
	var r int64
	b, c := 0, 0
	for _, p := range sh {
		r, b, c = r+p.Rate, b+p.Burst, c+p.Conc
		has := []bool{}
		if rate > 0 {
			has = append(has, p.Rate > 0, p.Burst > 0)
		}
		if l.Concurrency > 0 {
			has = append(has, p.Conc > 0)
		}
		for _, h := range has {
			if h != has[0] {
				return false
			}
		}
	}
	return r == rate && b == burst && c == l.Concurrency
}

// moveLimits writes the wanted parts (want[shard][key]) without the region
// ever holding more than a limit's figures while they move: every shard
// whose part of some key goes down is written first with the lower part
// (its bucket keeps at most the new burst; the tokens it gives up go to
// the shards raised), then every shard with its part: the rate and burst
// as wanted, the concurrency as far as what the shards run leaves room
// (a shard that runs past a part just lowered keeps those slots until its
// tasks end; the rest comes next round). A shard that holds its parts
// already (stored: how many keys its lim hash has) is not written again.
func (s *Maintainer) moveLimits(ctx context.Context, f queue.Fence, keys []string, ls []queue.Limit, now [][]queue.SharePart, stored []int, want [][]queue.SharePart) error {
	n := len(now)
	lower := make([][]queue.SharePart, n)
	running := make([][]int, n)
	gave := make([][]int64, n)
	for shard := range n {
		lower[shard] = make([]queue.SharePart, len(keys))
		running[shard] = make([]int, len(keys))
		moved := false
		for j := range keys {
			c, w := now[shard][j], want[shard][j]
			lo := queue.SharePart{Rate: min(c.Rate, w.Rate), Burst: min(c.Burst, w.Burst), Conc: min(c.Conc, w.Conc)}
			if lo.Rate == 0 || lo.Burst == 0 {
				lo.Rate, lo.Burst = 0, 0
			}
			lower[shard][j] = lo
			running[shard][j] = c.Running
			moved = moved || lo.Rate != c.Rate || lo.Burst != c.Burst || lo.Conc != c.Conc
		}
		if !moved {
			gave[shard] = make([]int64, len(keys))
			continue
		}
		r, g, err := s.writeLimits(ctx, f, shard, keys, ls, lower[shard], nil)
		if err != nil {
			return err
		}
		running[shard], gave[shard] = r, g
	}
	final := make([][]queue.SharePart, n)
	grants := make([][]int64, n)
	for shard := range n {
		final[shard] = make([]queue.SharePart, len(keys))
		grants[shard] = make([]int64, len(keys))
	}
	for j, l := range ls {
		rate, burst := queue.LimitFigures(l)
		freeR, freeB, freeC := rate, int64(burst), int64(l.Concurrency)
		var tokens int64
		for shard := range n {
			lo := lower[shard][j]
			freeR -= lo.Rate
			freeB -= int64(lo.Burst)
			freeC -= int64(max(lo.Conc, running[shard][j]))
			tokens += gave[shard][j]
		}
		for shard := range n {
			lo, w := lower[shard][j], want[shard][j]
			p := queue.SharePart{Rate: lo.Rate + max(min(w.Rate-lo.Rate, freeR), 0), Burst: lo.Burst + int(max(min(int64(w.Burst-lo.Burst), freeB), 0))}
			freeR -= p.Rate - lo.Rate
			freeB -= int64(p.Burst - lo.Burst)
			if p.Rate == 0 || p.Burst == 0 {
				freeR, freeB = freeR+p.Rate, freeB+int64(p.Burst)
				p.Rate, p.Burst = 0, 0
			}
			held := min(w.Conc, max(lo.Conc, running[shard][j]))
			give := max(min(int64(w.Conc-held), freeC), 0)
			p.Conc = held + int(give)
			freeC -= give
			g := min(tokens, int64(p.Burst-lo.Burst)*1e6)
			grants[shard][j], tokens = g, tokens-g
			final[shard][j] = p
		}
	}
	for shard := range n {
		same := stored[shard] == len(keys)
		for j := range keys {
			same = same && grants[shard][j] == 0 && limitPart(ls[j], final[shard][j]) == now[shard][j].Stored
		}
		if same {
			continue
		}
		if _, _, err := s.writeLimits(ctx, f, shard, keys, ls, final[shard], grants[shard]); err != nil {
			return err
		}
	}
	return nil
}

// limitPart encodes one shard's part of limit l for the lim hash: "rate
// burst concurrency" (rate in milli-tasks/s). A rate part of none is "1 0"
// (a bucket that holds no token); a concurrency part of none "1 z" (lib.lua
// lim_cfg reads 0; a server of an older ax, during an upgrade, 1 as it
// always had). A key without a rate is "0 1 …".
func limitPart(l queue.Limit, p queue.SharePart) string {
	rb := "0 1"
	if l.Rate > 0 {
		rb = "1 0"
		if p.Rate > 0 && p.Burst > 0 {
			rb = fmt.Sprintf("%d %d", p.Rate, p.Burst)
		}
	}
	if (l.Concurrency > 0 || l.Closed) && p.Conc == 0 {
		return rb + " 1 z"
	}
	return fmt.Sprintf("%s %d", rb, p.Conc)
}

// writeLimits writes one shard's limits with the given parts (by keys'
// index) and tokens to add to their buckets (nil: none), and returns what
// each key runs on the shard after it and the tokens its bucket gave up.
func (s *Maintainer) writeLimits(ctx context.Context, f queue.Fence, shard int, keys []string, ls []queue.Limit, parts []queue.SharePart, grants []int64) ([]int, []int64, error) {
	argv := make([]any, 0, 3+4*len(keys))
	argv = append(argv, s.Clock(), f.Token, len(keys))
	for j, k := range keys {
		argv = append(argv, k, limitPart(ls[j], parts[j]))
	}
	for j, g := range grants {
		if g > 0 {
			argv = append(argv, keys[j], g)
		}
	}
	c, err := s.writeParts(ctx, queue.Scripts.Limits, "set limits", f, shard, argv, 1, 2*len(keys))
	if err != nil {
		return nil, nil, err
	}
	gave := make([]int64, len(keys))
	for j := range gave {
		gave[j] = int64(c[len(keys)+j])
	}
	return c[:len(keys)], gave, nil
}

// limitDemand reads every shard's part of each key (by keys' index), what
// it runs of it and has parked, and whether its bucket was spent within a
// refill, and how many keys each shard's lim hash holds: one script call a
// shard.
func (s *Maintainer) limitDemand(ctx context.Context, keys []string) ([][]queue.SharePart, []int, error) {
	at := make(map[string]int, len(keys))
	for j, k := range keys {
		at[k] = j
	}
	out := make([][]queue.SharePart, s.Shards())
	stored := make([]int, s.Shards())
	for shard := range out {
		out[shard] = make([]queue.SharePart, len(keys))
		res, err := s.Run(ctx, s.Client(), queue.Scripts.LimRead, s.KeysWith(shard), s.Clock()).Slice()
		if err != nil {
			return nil, nil, fmt.Errorf("queue: limits' demand: %w", err)
		}
		stored[shard] = len(res) / 5
		for i := 0; i+4 < len(res); i += 5 {
			j, ok := at[queue.ToStr(res[i])]
			if !ok {
				continue
			}
			p := queue.ParsePart(queue.ToStr(res[i+1]))
			p.Stored = queue.ToStr(res[i+1])
			r, _ := res[i+2].(int64)
			pk, _ := res[i+3].(int64)
			busy, _ := res[i+4].(int64)
			p.Running, p.Parked, p.Busy = int(r), int(pk), busy == 1
			out[shard][j] = p
		}
	}
	return out, stored, nil
}

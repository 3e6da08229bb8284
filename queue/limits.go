package queue

import (
	"context"
	"fmt"
	"github.com/ax-sched/ax/task"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Limit kinds: what a limit key counts (docs/limits.md).
const (
	LimitType   = "type"   // every task of a task type
	LimitTenant = "tenant" // every task of a tenant
	LimitKey    = "key"    // every task that names the limit_key
)

// Limit is a rate and concurrency limit on one key of a region (its share
// of a federation-wide limit already taken: see docs/limits.md). Rate 0
// and Concurrency 0 mean no such limit.
type Limit struct {
	Kind, Name  string
	Rate        float64 // tasks started per second, over every worker of the region
	Burst       int     // tasks that may start at once after a quiet spell (default: max(1, Rate))
	Concurrency int     // tasks RUNNING at once
}

// limitKey is the key's name in the store: 'y:', 'n:' or 'k:' and the name.
func KeyOfLimit(kind, name string) (string, error) {
	switch kind {
	case LimitType:
		return "y:" + name, nil
	case LimitTenant:
		return "n:" + name, nil
	case LimitKey:
		return "k:" + name, nil
	}
	return "", fmt.Errorf("queue: limit kind %q is not type, tenant or key", kind)
}

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
func (s *Maintainer) SetLimits(ctx context.Context, f Fence, limits []Limit) error {
	keys := make([]string, 0, len(limits))
	by := make(map[string]Limit, len(limits))
	for _, l := range limits {
		k, err := KeyOfLimit(l.Kind, l.Name)
		if err != nil {
			return err
		}
		if l.Rate <= 0 && l.Concurrency <= 0 {
			continue
		}
		if _, dup := by[k]; !dup {
			keys = append(keys, k)
		}
		by[k] = l
	}
	sort.Strings(keys)
	ls := make([]Limit, len(keys))
	for j, k := range keys {
		ls[j] = by[k]
	}
	n := s.Opts.Shards
	if n == 1 {
		whole := make([]SharePart, len(keys))
		for j, l := range ls {
			whole[j].Rate, whole[j].Burst = LimitFigures(l)
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
	want := make([][]SharePart, n)
	for shard := range n {
		want[shard] = make([]SharePart, len(keys))
	}
	col := make([]SharePart, n)
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
func (s *Maintainer) LimitsMove(limits []Limit) bool {
	if s.Opts.Shards < 2 {
		return false
	}
	for _, l := range limits {
		if l.Rate > 0 || l.Concurrency > 0 {
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
func followWork(l Limit, sh []SharePart, turn int) []SharePart {
	n := len(sh)
	rate, burst := LimitFigures(l)
	work := make([]int64, n)
	worked := false
	for i, p := range sh {
		work[i] = int64(p.Running + p.parked)
		if p.busy {
			work[i]++
		}
		worked = worked || work[i] > 0
	}
	if !worked {
		if partsHold(l, sh) {
			out := make([]SharePart, n)
			for i, p := range sh {
				out[i] = SharePart{Rate: p.Rate, Burst: p.Burst, Conc: p.Conc}
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
	out := make([]SharePart, n)
	conc := apportion(int64(l.Concurrency), order, work)
	bursts := apportion(int64(burst), order, work)
	rates := apportion(rate, order, work)
	for i := range n {
		out[i] = SharePart{Rate: rates[i], Burst: int(bursts[i]), Conc: int(conc[i])}
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
func partsHold(l Limit, sh []SharePart) bool {
	rate, burst := LimitFigures(l)
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
func (s *Maintainer) moveLimits(ctx context.Context, f Fence, keys []string, ls []Limit, now [][]SharePart, stored []int, want [][]SharePart) error {
	n := len(now)
	lower := make([][]SharePart, n)
	running := make([][]int, n)
	gave := make([][]int64, n)
	for shard := range n {
		lower[shard] = make([]SharePart, len(keys))
		running[shard] = make([]int, len(keys))
		moved := false
		for j := range keys {
			c, w := now[shard][j], want[shard][j]
			lo := SharePart{Rate: min(c.Rate, w.Rate), Burst: min(c.Burst, w.Burst), Conc: min(c.Conc, w.Conc)}
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
	final := make([][]SharePart, n)
	grants := make([][]int64, n)
	for shard := range n {
		final[shard] = make([]SharePart, len(keys))
		grants[shard] = make([]int64, len(keys))
	}
	for j, l := range ls {
		rate, burst := LimitFigures(l)
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
			p := SharePart{Rate: lo.Rate + max(min(w.Rate-lo.Rate, freeR), 0), Burst: lo.Burst + int(max(min(int64(w.Burst-lo.Burst), freeB), 0))}
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
			same = same && grants[shard][j] == 0 && limitPart(ls[j], final[shard][j]) == now[shard][j].stored
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
func limitPart(l Limit, p SharePart) string {
	rb := "0 1"
	if l.Rate > 0 {
		rb = "1 0"
		if p.Rate > 0 && p.Burst > 0 {
			rb = fmt.Sprintf("%d %d", p.Rate, p.Burst)
		}
	}
	if l.Concurrency > 0 && p.Conc == 0 {
		return rb + " 1 z"
	}
	return fmt.Sprintf("%s %d", rb, p.Conc)
}

// writeLimits writes one shard's limits with the given parts (by keys'
// index) and tokens to add to their buckets (nil: none), and returns what
// each key runs on the shard after it and the tokens its bucket gave up.
func (s *Maintainer) writeLimits(ctx context.Context, f Fence, shard int, keys []string, ls []Limit, parts []SharePart, grants []int64) ([]int, []int64, error) {
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
	c, err := s.writeParts(ctx, Scripts.limits, "set limits", f, shard, argv, 1, 2*len(keys))
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
func (s *Maintainer) limitDemand(ctx context.Context, keys []string) ([][]SharePart, []int, error) {
	at := make(map[string]int, len(keys))
	for j, k := range keys {
		at[k] = j
	}
	out := make([][]SharePart, s.Opts.Shards)
	stored := make([]int, s.Opts.Shards)
	for shard := range out {
		out[shard] = make([]SharePart, len(keys))
		res, err := s.Run(ctx, s.RDB, Scripts.limRead, s.KeysWith(shard), s.Clock()).Slice()
		if err != nil {
			return nil, nil, fmt.Errorf("queue: limits' demand: %w", err)
		}
		stored[shard] = len(res) / 5
		for i := 0; i+4 < len(res); i += 5 {
			j, ok := at[ToStr(res[i])]
			if !ok {
				continue
			}
			p := ParsePart(ToStr(res[i+1]))
			p.stored = ToStr(res[i+1])
			r, _ := res[i+2].(int64)
			pk, _ := res[i+3].(int64)
			busy, _ := res[i+4].(int64)
			p.Running, p.parked, p.busy = int(r), int(pk), busy == 1
			out[shard][j] = p
		}
	}
	return out, stored, nil
}

// movedPart is the part a shard's "a b part" value holds, 0 for "a b 1 z"
// (limitPart, fairPart).
func MovedPart(v string) int {
	f := strings.Fields(v)
	if len(f) < 3 || len(f) > 3 && f[3] == "z" {
		return 0
	}
	c, _ := strconv.Atoi(f[2])
	return c
}

// MaxRetryAfter bounds a handler's retry after: a pause longer than this is
// cut to it, so a mistaken answer cannot stop a key for days.
const MaxRetryAfter = time.Hour

// RetryAfter gives a RUNNING task back without spending a retry and pauses
// its tenant's tasks of its limit key (of its type when it names none) for
// every worker of the region until now + d (cut to MaxRetryAfter, at least 1 ms). The task
// waits READY until then. A cancel requested meanwhile wins (CANCELED).
func (s *Claimer) RetryAfter(ctx context.Context, id, token string, d time.Duration) (task.State, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return "", err
	}
	d = min(max(d, time.Millisecond), MaxRetryAfter)
	out, err := s.Run(ctx, s.RDB, Scripts.ret, s.KeysWith(shard), s.Clock(), id, token, task.ReasonRetryAfter,
		0, s.Opts.RetainCanceled.Milliseconds(), d.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: retry after: %w", err)
	}
	if err := leaseResult(id, out); err != nil {
		return "", err
	}
	return StateOf(ToStr(out[1])), nil
}

// LimitState is what the store holds for one limit key on one shard (tests,
// status).
type LimitState struct {
	Running     int       // tasks RUNNING under its concurrency limit
	Parked      int       // READY tasks set aside until it has room
	PausedUntil time.Time // zero: not paused
}

// LimitStatus reads a limit key's state summed over the shards.
func (s *Tasks) LimitStatus(ctx context.Context, kind, name string) (LimitState, error) {
	k, err := KeyOfLimit(kind, name)
	if err != nil {
		return LimitState{}, err
	}
	return s.keyStatus(ctx, k)
}

// PauseStatus reads the state of a retry after's pause: a tenant's tasks of
// a limit key, or of a task type (limitKey "").
func (s *Tasks) PauseStatus(ctx context.Context, tenant, limitKey, taskType string) (LimitState, error) {
	if tenant == "" {
		tenant = "default"
	}
	k := "p:" + tenant + "|y:" + taskType
	if limitKey != "" {
		k = "p:" + tenant + "|k:" + limitKey
	}
	return s.keyStatus(ctx, k)
}

func (s *Tasks) keyStatus(ctx context.Context, k string) (LimitState, error) {
	var st LimitState
	for shard := range s.Keys {
		p := s.Keys[shard].Prefix
		pipe := s.RDB.Pipeline()
		lc := pipe.HGet(ctx, p+"lc", k)
		pk := pipe.ZCard(ctx, p+"pk:"+k)
		lp := pipe.HGet(ctx, p+"lp", k)
		_, _ = pipe.Exec(ctx) // HGET of an absent field is redis.Nil: read each answer
		if err := pk.Err(); err != nil {
			return st, fmt.Errorf("queue: limit status: %w", err)
		}
		n, _ := strconv.Atoi(lc.Val())
		st.Running += n
		st.Parked += int(pk.Val())
		if u, _ := strconv.ParseInt(lp.Val(), 10, 64); u > 0 {
			if t := time.UnixMilli(u); t.After(st.PausedUntil) && t.After(s.Now()) {
				st.PausedUntil = t
			}
		}
	}
	return st, nil
}

// limitFigures are a limit's rate (milli-tasks/s, at least 1) and burst
// (default max(1, rate)) over the region; 0, 0 without a rate.
func LimitFigures(l Limit) (rateMilli int64, burst int) {
	if l.Rate <= 0 {
		return 0, 0
	}
	rateMilli = max(int64(math.Round(l.Rate*1000)), 1)
	burst = l.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(l.Rate)))
	}
	return rateMilli, burst
}

// sharePart is one shard's part of a limit and, read back, the key's work
// there: tasks of it running, parked, and whether its bucket was spent
// within a refill.
type SharePart struct {
	Rate            int64 // milli-tasks/s; 0 with burst 0: none (or no rate)
	Burst, Conc     int
	Running, parked int
	busy            bool
	stored          string // the lim hash's value, as read ("": none)
}

// parsePart reads a lim hash value (limitPart): a rate part of none is
// written "1 0 …" (a bucket of no tokens), a concurrency part of none "… 1 z".
func ParsePart(v string) SharePart {
	f := strings.Fields(v)
	if len(f) < 3 {
		return SharePart{}
	}
	p := SharePart{Conc: MovedPart(v)}
	p.Rate, _ = strconv.ParseInt(f[0], 10, 64)
	p.Burst, _ = strconv.Atoi(f[1])
	if p.Rate == 0 || p.Burst == 0 {
		p.Rate, p.Burst = 0, 0
	}
	return p
}

package queue

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/task"
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
func limitKey(kind, name string) (string, error) {
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

// shardShare is shard i's part of a region's limit over n shards: a task's
// shard is chosen at submit, so each shard enforces its own part. The rate
// divides evenly; burst and concurrency by the largest remainder, at least
// 1 each, so no shard's tasks of the key can never run. A concurrency
// smaller than the shard count is not split so: its parts move to the
// shards' work instead (SetLimits), adding up to it.
func shardShare(l Limit, i, n int) (rateMilli int64, burst, conc int) {
	split := func(v int) int {
		if v <= 0 {
			return 0
		}
		s := v / n
		if i < v%n {
			s++
		}
		return max(s, 1)
	}
	if l.Rate > 0 {
		rateMilli = max(int64(math.Round(l.Rate*1000/float64(n))), 1)
	}
	b := l.Burst
	if b <= 0 {
		b = max(1, int(math.Ceil(l.Rate)))
	}
	return rateMilli, split(b), split(l.Concurrency)
}

// SetLimits replaces the region's limits (leader only). Each shard keeps
// its share; buckets, running counts, pauses and parked tasks carry over.
// A concurrency limit smaller than the shard count (1 on 3 masters) is
// held by the region as a whole: its parts add up to it, some shards
// having none for now (their tasks of the key wait parked), and they
// follow the work each time limits are written (LimitsMove says when to
// write again), as a slow lane's slots do: first to the shards running
// tasks of the key (as many as they run), then one to each shard with
// tasks parked (turn by turn), the rest to the first shards; parts are
// taken away before they are given elsewhere, so the region never runs
// more than the limit while they move.
func (s *Store) SetLimits(ctx context.Context, f Fence, limits []Limit) error {
	keys := make([]string, 0, len(limits))
	by := make(map[string]Limit, len(limits))
	for _, l := range limits {
		k, err := limitKey(l.Kind, l.Name)
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
	n := s.opts.Shards
	conc := make([][]int, n) // shard → concurrency part, in keys' order
	for shard := range n {
		conc[shard] = make([]int, len(keys))
		for j, k := range keys {
			_, _, conc[shard][j] = shardShare(by[k], shard, n)
		}
	}
	var moving []int // keys (by index) whose concurrency is below the shard count
	mv := make([]bool, len(keys))
	for j, k := range keys {
		if c := by[k].Concurrency; c > 0 && c < n {
			moving, mv[j] = append(moving, j), true
		}
	}
	write := func(shard int, parts []int) ([]int, error) {
		return s.writeLimits(ctx, f, shard, keys, by, parts, mv)
	}
	if len(moving) > 0 {
		now, err := s.limitShards(ctx, keys, moving)
		if err != nil {
			return err
		}
		turn := int(s.now().Unix() % int64(n))
		for _, j := range moving {
			want := placeLane(by[keys[j]].Concurrency, now, j, turn)
			for shard := range n {
				conc[shard][j] = want[shard]
			}
		}
		total := func(j int) int { return by[keys[j]].Concurrency }
		if err := moveParts(moving, total, conc, now, write); err != nil {
			return err
		}
	}
	for shard := range n {
		if _, err := write(shard, conc[shard]); err != nil {
			return err
		}
	}
	return nil
}

// LimitsMove tells the leader to write limits at every round, not only
// when they change: some concurrency limit is smaller than the store's
// shard count, and its parts follow the shards' work (SetLimits).
func (s *Store) LimitsMove(limits []Limit) bool {
	for _, l := range limits {
		if l.Concurrency > 0 && l.Concurrency < s.opts.Shards {
			return true
		}
	}
	return false
}

// limitPart encodes one shard's part of a limit for the lim hash: "rate
// burst concurrency", and for a moving concurrency whose part is none for
// now "rate burst 1 z" (lib.lua lim_cfg reads 0; a server of an older ax,
// during an upgrade, 1 as it always had).
func limitPart(rateMilli int64, burst, conc int, moving bool) string {
	if moving && conc == 0 {
		return fmt.Sprintf("%d %d 1 z", rateMilli, burst)
	}
	return fmt.Sprintf("%d %d %d", rateMilli, burst, conc)
}

// writeLimits writes one shard's limits with the given concurrency parts
// (by keys' index) and returns what each key runs on the shard after it.
func (s *Store) writeLimits(ctx context.Context, f Fence, shard int, keys []string, by map[string]Limit, conc []int, moving []bool) ([]int, error) {
	argv := make([]any, 0, 2+2*len(keys))
	argv = append(argv, s.clock(), f.Token)
	for j, k := range keys {
		r, b, _ := shardShare(by[k], shard, s.opts.Shards)
		argv = append(argv, k, limitPart(r, b, conc[j], moving[j]))
	}
	return s.writeParts(ctx, scripts.limits, "set limits", f, shard, argv, 1, len(keys))
}

// limitShards reads each shard's part of the moving limits now: its
// concurrency part, the tasks of the key it runs and those parked.
func (s *Store) limitShards(ctx context.Context, keys []string, moving []int) ([]laneShard, error) {
	where := func(p string, j int) partKeys {
		return partKeys{part: p + "lim", partField: keys[j], run: p + "lc", runField: keys[j], waiting: []string{p + "pk:" + keys[j]}}
	}
	return s.shardParts(ctx, len(keys), moving, where, movedPart)
}

// movedPart is the part a shard's "a b part" value holds, 0 for "a b 1 z"
// (limitPart, fairPart).
func movedPart(v string) int {
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
func (s *Store) RetryAfter(ctx context.Context, id, token string, d time.Duration) (task.State, error) {
	shard, err := s.shardOf(id)
	if err != nil {
		return "", err
	}
	d = min(max(d, time.Millisecond), MaxRetryAfter)
	out, err := s.run(ctx, s.rdb, scripts.ret, s.keysWith(shard), s.clock(), id, token, task.ReasonRetryAfter,
		0, s.opts.RetainCanceled.Milliseconds(), d.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: retry after: %w", err)
	}
	if err := leaseResult(id, out); err != nil {
		return "", err
	}
	return stateOf(toStr(out[1])), nil
}

// LimitState is what the store holds for one limit key on one shard (tests,
// status).
type LimitState struct {
	Running     int       // tasks RUNNING under its concurrency limit
	Parked      int       // READY tasks set aside until it has room
	PausedUntil time.Time // zero: not paused
}

// LimitStatus reads a limit key's state summed over the shards.
func (s *Store) LimitStatus(ctx context.Context, kind, name string) (LimitState, error) {
	k, err := limitKey(kind, name)
	if err != nil {
		return LimitState{}, err
	}
	return s.keyStatus(ctx, k)
}

// PauseStatus reads the state of a retry after's pause: a tenant's tasks of
// a limit key, or of a task type (limitKey "").
func (s *Store) PauseStatus(ctx context.Context, tenant, limitKey, taskType string) (LimitState, error) {
	if tenant == "" {
		tenant = "default"
	}
	k := "p:" + tenant + "|y:" + taskType
	if limitKey != "" {
		k = "p:" + tenant + "|k:" + limitKey
	}
	return s.keyStatus(ctx, k)
}

func (s *Store) keyStatus(ctx context.Context, k string) (LimitState, error) {
	var st LimitState
	for shard := range s.keys {
		p := s.keys[shard].prefix
		pipe := s.rdb.Pipeline()
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
			if t := time.UnixMilli(u); t.After(st.PausedUntil) && t.After(s.now()) {
				st.PausedUntil = t
			}
		}
	}
	return st, nil
}

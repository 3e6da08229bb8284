package queue

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
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
// 1 each, so no shard's tasks of the key can never run (with fewer slots
// than shards the region's total is then the shard count).
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
	for shard := range s.keys {
		argv := make([]any, 0, 2+2*len(keys))
		argv = append(argv, s.clock(), f.Token)
		for _, k := range keys {
			r, b, c := shardShare(by[k], shard, s.opts.Shards)
			argv = append(argv, k, fmt.Sprintf("%d %d %d", r, b, c))
		}
		out, err := s.run(ctx, s.rdb, scripts.limits, s.keysWith(shard, s.fenceKey(shard, f)), argv...).Slice()
		if err != nil {
			return fmt.Errorf("queue: set limits: %w", err)
		}
		if fenced(out) {
			return ErrFenced
		}
	}
	return nil
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

package queue

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RunTime is what a region's completions say about how long one task type
// runs in one pool: the learnt duration placement scores with.
//
// The scripts that end an attempt fold its run time (start to end) into
// its pair atomically, in the same call: complete.lua for every success,
// fail.lua for an attempt that ran into its deadline (a lower bound of the
// work there). Handler errors, cancellations, preemptions and lost leases
// are not observations: how soon an attempt failed or was stopped says
// nothing of how long the work takes, and counting them would make a pool
// that fails a type at once look the fastest for it.
type RunTime struct {
	Pool, Type string
	// Count is the number of observations (every shard's).
	Count int64
	// Mean and Spread are an exponentially weighted mean and standard
	// deviation of the run time (the plain ones for the first 1/alpha
	// observations; Options.RunTimeAlpha).
	Mean, Spread time.Duration
	// Last is when the latest observation was made.
	Last time.Time
}

func (s *Engine) Alpha() string { return strconv.FormatFloat(s.Opts.RunTimeAlpha, 'f', -1, 64) }

// RunTimes reads every shard's run times and merges them per (pool, type):
// counts add up, means are weighted by count, spreads pooled (within and
// between shards). Sorted by pool, then count (highest first), then type.
func (s *Tasks) RunTimes(ctx context.Context) ([]RunTime, error) {
	type part struct {
		n        int64
		mean, sd float64 // µs
		last     int64
	}
	by := map[[2]string][]part{}
	for shard := range s.Keys {
		h, err := s.RDB.HGetAll(ctx, s.Keys[shard].Rt).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: run times: %w", err)
		}
		for f, v := range h {
			pool, typ, ok := strings.Cut(f, " ")
			n, mean, sd, last, ok2 := parseRunTime(v)
			if ok && ok2 && n > 0 {
				k := [2]string{pool, typ}
				by[k] = append(by[k], part{n, mean, sd, last})
			}
		}
	}
	us := func(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Microsecond))) }
	out := make([]RunTime, 0, len(by))
	for k, ps := range by {
		var n int64
		var sum float64
		var last int64
		for _, p := range ps {
			n += p.n
			sum += float64(p.n) * p.mean
			last = max(last, p.last)
		}
		mean := sum / float64(n)
		// Pooled: each shard's own variance plus its mean's distance to
		// the merged one.
		var q float64
		for _, p := range ps {
			q += float64(p.n) * (p.sd*p.sd + (p.mean-mean)*(p.mean-mean))
		}
		out = append(out, RunTime{Pool: k[0], Type: k[1], Count: n, Mean: us(mean),
			Spread: us(math.Sqrt(q / float64(n))), Last: time.UnixMilli(last).UTC()})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Pool != b.Pool {
			return a.Pool < b.Pool
		}
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Type < b.Type
	})
	return out, nil
}

// parseRunTime reads "n mean_us sd_us last_ms" (lib.lua runtime).
func parseRunTime(v string) (n int64, mean, sd float64, last int64, ok bool) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return 0, 0, 0, 0, false
	}
	var nums [4]int64
	for i, x := range f {
		var err error
		if nums[i], err = strconv.ParseInt(x, 10, 64); err != nil {
			return 0, 0, 0, 0, false
		}
	}
	return nums[0], float64(nums[1]), float64(nums[2]), nums[3], true
}

// TrimRunTimes keeps each shard's run-time hash well under its cap
// (Options.RunTimePairs, which the scripts never exceed: a new pair is
// dropped while the hash is full): a shard past 3/4 of the cap is brought
// down to half, the least used pairs first (rt_trim.lua). Leader only; it
// returns how many pairs it removed. Without it the first RunTimePairs
// type names ever completed would hold the hash for good.
func (s *Maintainer) TrimRunTimes(ctx context.Context, f Fence) (int, error) {
	removed := 0
	for shard := range s.Keys {
		n, err := s.RDB.HLen(ctx, s.Keys[shard].Rt).Result()
		if err != nil {
			return removed, fmt.Errorf("queue: trim run times: %w", err)
		}
		if n <= int64(s.Opts.RunTimePairs)*3/4 {
			continue
		}
		out, err := s.Run(ctx, s.RDB, Scripts.rtTrim, s.KeysWith(shard, s.fenceKey(shard, f), s.Keys[shard].Rt),
			s.Clock(), f.Token, max(1, s.Opts.RunTimePairs/2)).Slice()
		if err != nil {
			return removed, fmt.Errorf("queue: trim run times: %w", err)
		}
		if fenced(out) {
			return removed, ErrFenced
		}
		removed += ToInt(out[0])
	}
	return removed, nil
}

package read

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
)

// RunTimes reads every shard's run times and merges them per (pool, type,
// tenant): counts add up, means are weighted by count, spreads pooled
// (within and between shards). Sorted by pool, then count (highest first),
// then type and tenant.
func (s *Tasks) RunTimes(ctx context.Context) ([]queue.RunTime, error) {
	type part struct {
		n        int64
		mean, sd float64 // µs
		last     int64
	}
	by := map[[3]string][]part{}
	for shard := range s.Shards() {
		h, err := s.Client().HGetAll(ctx, queue.RunTimesKey(s.Prefix(shard))).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: run times: %w", err)
		}
		for f, v := range h {
			k, ok := splitRunTimeField(f)
			n, mean, sd, last, ok2 := queue.ParseRunTime(v)
			if ok && ok2 && n > 0 {
				by[k] = append(by[k], part{n, mean, sd, last})
			}
		}
	}
	us := func(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Microsecond))) }
	out := make([]queue.RunTime, 0, len(by))
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
		out = append(out, queue.RunTime{Pool: k[0], Type: k[1], Tenant: k[2], Count: n, Mean: us(mean),
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
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Tenant < b.Tenant
	})
	return out, nil
}

// splitRunTimeField reads "<pool> <type> <tenant>" (lib.lua runtime).
func splitRunTimeField(f string) ([3]string, bool) {
	pool, rest, ok := strings.Cut(f, " ")
	typ, tenant, ok2 := strings.Cut(rest, " ")
	return [3]string{pool, typ, tenant}, ok && ok2 && pool != "" && typ != ""
}

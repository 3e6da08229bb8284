package read

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/redis/go-redis/v9"
)

// Costs reads this region's cost records of the UTC days from..to
// (inclusive, at most MaxCostDays), every shard's, one record per shard
// and field: callers sum them.
func (s *Tasks) Costs(ctx context.Context, from, to time.Time) ([]queue.CostRecord, error) {
	from, to = queue.CostDay(from), queue.CostDay(to)
	if to.Before(from) {
		return nil, nil
	}
	days := int(to.Sub(from)/(24*time.Hour)) + 1
	if days > queue.MaxCostDays {
		return nil, fmt.Errorf("queue: costs: %d days (at most %d)", days, queue.MaxCostDays)
	}
	var out []queue.CostRecord
	for shard := range s.Shards() {
		pipe := s.Client().Pipeline()
		cmds := make([]*redis.MapStringStringCmd, days)
		for d := range days {
			day := from.Add(time.Duration(d) * 24 * time.Hour)
			cmds[d] = pipe.HGetAll(ctx, queue.CostKey(s.Prefix(shard), day.Unix()/86400))
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, fmt.Errorf("queue: costs: %w", err)
		}
		for d, c := range cmds {
			day := from.Add(time.Duration(d) * 24 * time.Hour)
			for f, v := range c.Val() {
				if r, ok := parseCost(day, f, v); ok {
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}

func parseCost(day time.Time, field, value string) (queue.CostRecord, bool) {
	k := strings.SplitN(field, "\t", 4)
	v := strings.Fields(value)
	if len(k) != 4 || len(v) != 4 {
		return queue.CostRecord{}, false
	}
	var n [4]int64
	for i, s := range v {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return queue.CostRecord{}, false
		}
		n[i] = x
	}
	return queue.CostRecord{Day: day, Tenant: k[0], Type: k[1], Pool: k[2], Tags: record.DecodeTags(k[3]),
		Runs: n[0], Failed: n[1], RunTime: time.Duration(n[2]) * time.Millisecond, PicoUSD: n[3]}, true
}

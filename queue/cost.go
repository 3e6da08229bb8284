package queue

import (
	"context"
	"fmt"
	"github.com/redis/go-redis/v9"
	"strconv"
	"strings"
	"time"
)

// CostRecord is what the attempts of one (tenant, type, pool, tags) cost
// on one UTC day in this region: the scripts that end an attempt
// (complete.lua, fail.lua) fold each one into its day's record atomically,
// in the same call (lib.lua cost; docs/cost.md). Records are kept
// MaxCostDays after their day's last write.
type CostRecord struct {
	Day                time.Time // UTC midnight
	Tenant, Type, Pool string
	Tags               map[string]string // the task's required tags
	Runs, Failed       int64             // attempts ended; of them not successful
	RunTime            time.Duration     // claim to end, summed
	PicoUSD            int64             // price at claim × run time, in 1e-12 USD
}

// MaxCostDays is how many days of cost records a range may span, and
// how long a day's records are kept (lib.lua COST_TTL_MS).
const MaxCostDays = 400

// CostOther is the type of a tenant's attempts counted past its fields of
// a day (lib.lua COST_CAP), per pool, and the tenant too past a day's
// tenants (COST_TENANTS).
const CostOther = "_other"

// CostDay is the UTC day of t.
func CostDay(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

// Costs reads this region's cost records of the UTC days from..to
// (inclusive, at most MaxCostDays), every shard's, one record per shard
// and field: callers sum them.
func (s *Tasks) Costs(ctx context.Context, from, to time.Time) ([]CostRecord, error) {
	from, to = CostDay(from), CostDay(to)
	if to.Before(from) {
		return nil, nil
	}
	days := int(to.Sub(from)/(24*time.Hour)) + 1
	if days > MaxCostDays {
		return nil, fmt.Errorf("queue: costs: %d days (at most %d)", days, MaxCostDays)
	}
	var out []CostRecord
	for shard := range s.Keys {
		pipe := s.RDB.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, days)
		for d := range days {
			day := from.Add(time.Duration(d) * 24 * time.Hour)
			cmds[d] = pipe.HGetAll(ctx, s.Keys[shard].Prefix+"cost:"+strconv.FormatInt(day.Unix()/86400, 10))
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

func parseCost(day time.Time, field, value string) (CostRecord, bool) {
	k := strings.SplitN(field, "\t", 4)
	v := strings.Fields(value)
	if len(k) != 4 || len(v) != 4 {
		return CostRecord{}, false
	}
	var n [4]int64
	for i, s := range v {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return CostRecord{}, false
		}
		n[i] = x
	}
	return CostRecord{Day: day, Tenant: k[0], Type: k[1], Pool: k[2], Tags: decodeTags(k[3]),
		Runs: n[0], Failed: n[1], RunTime: time.Duration(n[2]) * time.Millisecond, PicoUSD: n[3]}, true
}

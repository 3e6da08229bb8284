package queue

import (
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

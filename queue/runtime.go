package queue

import (
	"strconv"
	"strings"
	"time"
)

// RunTime is what a region's completions say about how long one tenant's
// task type runs in one pool: the learnt duration placement scores that
// tenant's tasks with. Learnt per tenant, so that no tenant's runs move
// another's placements.
//
// The scripts that end an attempt fold its run time (start to end) into
// its pair atomically, in the same call: complete.lua for every success,
// fail.lua for an attempt that ran into its deadline (a lower bound of the
// work there). Handler errors, cancellations, preemptions and lost leases
// are not observations: how soon an attempt failed or was stopped says
// nothing of how long the work takes, and counting them would make a pool
// that fails a type at once look the fastest for it.
type RunTime struct {
	Pool, Type, Tenant string
	// Count is the number of observations (every shard's).
	Count int64
	// Mean and Spread are an exponentially weighted mean and standard
	// deviation of the run time (the plain ones for the first 1/alpha
	// observations; Options.RunTimeAlpha).
	Mean, Spread time.Duration
	// Last is when the latest observation was made.
	Last time.Time
}

func (s *Engine) Alpha() string { return strconv.FormatFloat(s.opts.RunTimeAlpha, 'f', -1, 64) }

// parseRunTime reads "n mean_us sd_us last_ms" (lib.lua runtime).
func ParseRunTime(v string) (n int64, mean, sd float64, last int64, ok bool) {
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

package placement

import (
	"fmt"
	"math"
	"time"
)

// Config holds the placement thresholds. Start from [DefaultConfig]; the zero Config is invalid.
type Config struct {
	// StaleAfter: a pool whose figures are older than this is rejected with STALE_STATUS.
	StaleAfter time.Duration
	// SoftWatermark is validated (in [0, 1), below HardWatermark) so configurations that set it
	// keep loading; it changes no score.
	//
	// Deprecated: below the hard watermark every pool scores at its price, so the cheapest pool
	// within its wait target fills to its spill watermark before anything spills; the spread
	// between pools comes from the expected-wait rule (MaxWait) and herd damping.
	SoftWatermark float64
	// HardWatermark (the spill watermark) is the queue fill at which a pool is SATURATED for
	// non-critical tasks; critical tasks are still admitted there, at PenaltyMax.
	HardWatermark float64
	// PenaltyMax is the cost multiplier of a pool at or above the hard watermark, where only
	// critical tasks go: they prefer any pool below it unless it costs PenaltyMax× more. Below
	// the hard watermark the multiplier is 1.
	PenaltyMax float64
	// CrossRegionPenalty is added, in USD, to the cost of a pool outside the task's home region.
	CrossRegionPenalty float64
	// DefaultDuration is the expected duration of a task type with no estimate for a pool.
	DefaultDuration time.Duration
	// Servers is how many servers place into the same pools; each assumes 1/Servers of a pool's
	// headroom.
	Servers int
	// EstimatorSize bounds the number of (task type, pool) duration estimates kept.
	EstimatorSize int
	// EWMAAlpha is the weight of a new observation in a duration estimate, in (0, 1].
	EWMAAlpha float64
	// EstimateRefresh is how long a Placer may keep deciding on duration estimates that have
	// changed since it last read them (0: reread after every change).
	EstimateRefresh time.Duration
	// MaxWait is the default target for a task's expected wait in a pool: a pool's MaxWait,
	// when set, replaces it for that pool, and a task's own MaxWait, when set, tightens it
	// (the smaller applies); 0: none. The rule: the cheapest pool whose expected wait stays within its target wins;
	// when every eligible pool's expected wait is past its target, the pool with the least
	// expected wait wins (ties by cost). A pool's expected wait is the tasks ahead of a new
	// one (queued, plus this server's damped placements, minus free slots) ÷ its drain rate
	// (Pool.DrainRate when measured, else its slots ÷ the type's expected duration there).
	MaxWait time.Duration
}

// DefaultConfig returns the defaults of docs/architecture.md §5. It is the only place defaults live.
func DefaultConfig() Config {
	return Config{
		StaleAfter:         15 * time.Second,
		SoftWatermark:      0.6,
		HardWatermark:      0.95,
		PenaltyMax:         4,
		CrossRegionPenalty: 0,
		DefaultDuration:    time.Second,
		Servers:            1,
		EstimatorSize:      10_000,
		// 0.2 follows a change of a type's duration within ~10 completions without chasing one
		// outlier.
		EWMAAlpha: 0.2,
		// Estimates move over many completions; a second's delay changes no meaningful choice and
		// spares rereading every pool's estimate after each completion.
		EstimateRefresh: time.Second,
	}
}

// Validate reports the first invalid setting, naming its configuration key.
func (c Config) Validate() error {
	bad := func(key string, v any, want string) error {
		return fmt.Errorf("placement: config %s = %v: %s", key, v, want)
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case c.StaleAfter <= 0:
		return bad("stale_after", c.StaleAfter, "must be > 0")
	case !finite(c.SoftWatermark) || c.SoftWatermark < 0 || c.SoftWatermark >= 1:
		return bad("soft_watermark", c.SoftWatermark, "must be in [0, 1)")
	case !finite(c.HardWatermark) || c.HardWatermark <= c.SoftWatermark || c.HardWatermark > 1:
		return bad("hard_watermark", c.HardWatermark, "must be in (soft_watermark, 1]")
	case !finite(c.PenaltyMax) || c.PenaltyMax < 1:
		return bad("penalty_max", c.PenaltyMax, "must be >= 1")
	case !finite(c.CrossRegionPenalty) || c.CrossRegionPenalty < 0:
		return bad("cross_region_penalty", c.CrossRegionPenalty, "must be >= 0")
	case c.DefaultDuration <= 0:
		return bad("default_duration", c.DefaultDuration, "must be > 0")
	case c.Servers < 1:
		return bad("servers", c.Servers, "must be >= 1")
	case c.EstimatorSize < 1:
		return bad("estimator_size", c.EstimatorSize, "must be >= 1")
	case !finite(c.EWMAAlpha) || c.EWMAAlpha <= 0 || c.EWMAAlpha > 1:
		return bad("ewma_alpha", c.EWMAAlpha, "must be in (0, 1]")
	case c.EstimateRefresh < 0:
		return bad("estimate_refresh", c.EstimateRefresh, "must be >= 0")
	case c.MaxWait < 0:
		return bad("max_wait", c.MaxWait, "must be >= 0")
	}
	return nil
}

// fill is the queue fill of a pool of the given capacity holding ready tasks. A pool without a
// queue is full as soon as anything waits.
func fill(ready int64, capacity int) float64 {
	switch {
	case capacity > 0:
		return float64(ready) / float64(capacity)
	case ready > 0:
		return 1
	}
	return 0
}

// penalty maps an effective queue fill to the cost multiplier: 1 below the hard (spill)
// watermark, PenaltyMax at and above it. A step, not a ramp: the cheapest pool takes work until
// its spill watermark, so a burst fills it before anything spills (a ramp made two pools share
// from the price crossover on, e.g. at 0.72 fill in `ax dev`); critical tasks, the only ones
// placed past the watermark, still prefer a pool below it.
func (c *Config) penalty(fill float64) float64 {
	if fill >= c.HardWatermark {
		return c.PenaltyMax
	}
	return 1
}

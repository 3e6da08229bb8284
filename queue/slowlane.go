package queue

import "time"

// SlowLane keeps one pool's slow tasks to a share of its slots
// (docs/fairness.md): a task of a slow type starts only while fewer than
// Slots of them run in the region's pool, so quick tasks keep flowing
// behind a flood of slow ones. Past the lane a slow task waits READY,
// parked (SLOW_LANE_FULL in its trail, no retry spent), until a slow task
// ends.
type SlowLane struct {
	// Threshold: a type whose learnt run time is at least this is slow,
	// and so is one with a task RUNNING for longer (its heartbeat says so
	// at once, before any of them ended).
	Threshold time.Duration
	// Slots is how many slow tasks the pool runs at once in the region
	// (at least 1), over all shards.
	Slots int
	// Slow are the tenants' types the learnt run times put past Threshold
	// (slow for that tenant only); Known every tenant's type with a learnt
	// run time: one known and not slow is quick again if a heartbeat marked it.
	Slow, Known []LaneType
}

// LaneType is one tenant's task type in a slow lane ("default": no tenant).
type LaneType struct{ Type, Tenant string }

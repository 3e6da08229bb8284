package placement

import (
	"errors"
	"fmt"
	"time"
)

// Reason says why a pool was rejected. The values are the reason codes of docs/architecture.md §5, used in
// logs, metrics and the API as they are.
type Reason string

// Reasons, in the order the filters run; a pool gets the first that applies.
const (
	// ReasonTagMismatch: the pool lacks a tag of the task, or has another value for it.
	ReasonTagMismatch Reason = "TAG_MISMATCH"
	// ReasonTenantPool: the pool is other tenants' own (pools[].tenants) and not the task's
	// tenant's.
	ReasonTenantPool Reason = "TENANT_POOL"
	// ReasonRegionExcluded: the task's Regions do not include the pool's region.
	ReasonRegionExcluded Reason = "REGION_EXCLUDED"
	// ReasonUnhealthy: the pool's region is not registered or not healthy.
	ReasonUnhealthy Reason = "UNHEALTHY"
	// ReasonStaleStatus: the pool's figures are older than Config.StaleAfter.
	ReasonStaleStatus Reason = "STALE_STATUS"
	// ReasonNoCapacityWindow: a capacity window withdraws all of the pool's slots now.
	ReasonNoCapacityWindow Reason = "NO_CAPACITY_WINDOW"
	// ReasonNoSlots: the design's "pool has live slots" filter; the pool has none and does not
	// scale from zero.
	ReasonNoSlots Reason = "NO_SLOTS"
	// ReasonNoHandler: the pool's live workers publish the task types they serve and the
	// task's is not among them (a worker that serves it may come: it is not unplaceable).
	ReasonNoHandler Reason = "NO_HANDLER"
	// ReasonSaturated: this server's share of the pool's headroom is used up (queue fill, with
	// damping, at the hard watermark); critical tasks are still admitted.
	ReasonSaturated Reason = "SATURATED"
)

// reason is a Reason as a small code, so per-pool arrays stay compact.
type reason uint8

const (
	rNone reason = iota
	rTagMismatch
	rTenantPool
	rRegionExcluded
	rUnhealthy
	rStale
	rWindow
	rNoSlots
	rNoHandler
	rSaturated
)

var reasonNames = [...]Reason{
	rNone:           "",
	rTagMismatch:    ReasonTagMismatch,
	rTenantPool:     ReasonTenantPool,
	rRegionExcluded: ReasonRegionExcluded,
	rUnhealthy:      ReasonUnhealthy,
	rStale:          ReasonStaleStatus,
	rWindow:         ReasonNoCapacityWindow,
	rNoSlots:        ReasonNoSlots,
	rNoHandler:      ReasonNoHandler,
	rSaturated:      ReasonSaturated,
}

// ErrNoCandidate is wrapped by every error of a failed Decision.
var ErrNoCandidate = errors.New("placement: no candidate pool")

// The errors of a failed Decision; the API maps them to HTTP statuses in one place.
var (
	// ErrUnplaceable: no pool carries the task's tags in an allowed region; it never will until
	// pools change (HTTP 422 with the explanation).
	ErrUnplaceable = fmt.Errorf("%w: no pool matches the task's tags and regions", ErrNoCandidate)
	// ErrSaturated: every matching pool is saturated (HTTP 429 with Retry-After).
	ErrSaturated = fmt.Errorf("%w: every matching pool is saturated", ErrNoCandidate)
	// ErrNoCapacity: matching pools exist but none can take the task now (keep it PENDING with
	// NO_CAPACITY).
	ErrNoCapacity = fmt.Errorf("%w: no matching pool has capacity now", ErrNoCandidate)
)

type outcome uint8

// The zero outcome is noCapacity, so a zero Decision is a failure, never a placement.
const (
	noCapacity outcome = iota
	placed
	unplaceable
	allSaturated
)

// Decision is the result of a placement.
type Decision struct {
	// Region and Pool name the chosen pool; empty when !OK.
	Region string
	Pool   string
	// Index is the chosen pool's position in the slice given to NewSnapshot; -1 when !OK.
	Index int
	// Cost is the chosen pool's score: expected cost of the task there, in USD.
	Cost float64
	// Expected is what the task is expected to cost in the chosen pool, in
	// USD: its price × the expected duration (Candidate.BaseCost), without
	// the queue and cross-region penalties of Cost.
	Expected float64
	// OK is true when a pool was chosen.
	OK bool
	// Wait is the chosen pool's expected wait for the task; OverTarget is true when it is
	// past the task's target there (every eligible pool was: the least-wait pool won).
	Wait       time.Duration
	OverTarget bool

	outcome   outcome
	noHandler bool
}

// NoHandler reports a decision that chose no pool because no pool passing the tag and region
// filters may run the task's type: some were NO_HANDLER (their live workers serve other
// types) and the others have no live worker. The task waits for one; its type may be
// misspelt.
func (d Decision) NoHandler() bool { return d.noHandler }

// Unplaceable reports that no pool could ever take the task: every pool was rejected for
// TAG_MISMATCH or REGION_EXCLUDED. An empty snapshot is not unplaceable (the view may not be
// loaded yet); it gives NO_CAPACITY, and so does NO_HANDLER (a worker may start).
func (d Decision) Unplaceable() bool { return d.outcome == unplaceable }

// AllSaturated reports that every pool passing the tag and region filters was rejected as
// SATURATED. When some were rejected for another transient reason (unhealthy, stale, window, no
// slots, no handler) the decision is plain NO_CAPACITY instead.
func (d Decision) AllSaturated() bool { return d.outcome == allSaturated }

// Err returns nil when OK, else ErrUnplaceable, ErrSaturated or ErrNoCapacity.
func (d Decision) Err() error {
	switch d.outcome {
	case placed:
		return nil
	case unplaceable:
		return ErrUnplaceable
	case allSaturated:
		return ErrSaturated
	}
	return ErrNoCapacity
}

// classify names the outcome of a decision that chose no pool, from the number of pools that
// passed the tag and region filters and how many of those were then rejected as SATURATED.
func classify(pools, matching, saturated int) outcome {
	switch {
	case pools > 0 && matching == 0:
		return unplaceable
	case matching > 0 && saturated == matching:
		return allSaturated
	}
	return noCapacity
}

// Explanation is a dry-run decision with every pool's filters and score parts.
type Explanation struct {
	// Decision is what Place would have returned (nothing is counted).
	Decision Decision
	// Candidates has one entry per pool, in the order given to NewSnapshot.
	Candidates []Candidate
	// Rule says how the winner was chosen among the eligible pools.
	Rule Rule
}

// Rule names how a decision traded cost against expected wait (Config.MaxWait).
type Rule string

const (
	// RuleCheapest: no eligible pool had a wait target; the cheapest won.
	RuleCheapest Rule = "cheapest"
	// RuleCheapestWithinWait: the cheapest pool whose expected wait is within its target won.
	RuleCheapestWithinWait Rule = "cheapest_within_wait"
	// RuleLeastWait: every eligible pool's expected wait was past its target; the least won.
	RuleLeastWait Rule = "least_wait"
)

// WaitSource says which drain rate a pool's expected wait was worked out with.
type WaitSource string

const (
	// WaitFreeSlot: a slot is free for the task; it waits for nothing.
	WaitFreeSlot WaitSource = "free_slot"
	// WaitMeasured: the tasks ahead ÷ the pool's measured drain rate (Pool.DrainRate).
	WaitMeasured WaitSource = "measured_drain"
	// WaitSlots: no measured rate; the tasks ahead ÷ (slots ÷ the type's expected duration).
	WaitSlots WaitSource = "slots"
)

// Candidate is one pool in an Explanation. The score parts are set for pools that passed the
// filters before saturation (so a SATURATED pool shows what it would have cost); Price is always
// set.
type Candidate struct {
	Region string
	Pool   string
	// Index in the slice given to NewSnapshot.
	Index int
	// Reason is why the pool was rejected; empty when it was eligible.
	Reason Reason
	// Detail is the figure behind Reason ("0.96 fill ≥ 0.95 hard watermark (…)"), or for an
	// eligible pool its watermark penalty; set by Explain only.
	Detail string
	// Price is the effective price per slot-hour, after discount.
	Price float64
	// Duration is the expected duration; DurationKnown is true when it is the pool's own
	// learnt estimate. DurationSource says where it came from, Observations how many runs are
	// behind it (the pool's own, or those of every pool a type_other_pools value was taken
	// from; 0 for the default), Spread their standard deviation (learnt only; 0 if unknown).
	Duration       time.Duration
	DurationKnown  bool
	DurationSource Source
	Observations   int64
	Spread         time.Duration
	// BaseCost = Price × Duration in hours.
	BaseCost float64
	// Fill is the effective queue fill, counting this server's damping; Penalty its multiplier.
	Fill    float64
	Penalty float64
	// CrossRegion is the cross-region penalty in USD (0 in the home region).
	CrossRegion float64
	// Cost = BaseCost × Penalty + CrossRegion.
	Cost float64
	// Won marks the chosen pool.
	Won bool
	// Wait is the expected wait of the task in this pool: Ahead tasks (queued, plus this
	// server's damped placements, minus free slots; < 0 means a slot is free) ÷ DrainRate
	// (tasks per second, from WaitSource). WaitTarget is the target that applied (0: none);
	// OverTarget is Wait > WaitTarget.
	Wait       time.Duration
	Ahead      int64
	DrainRate  float64
	WaitSource WaitSource
	WaitTarget time.Duration
	OverTarget bool
}

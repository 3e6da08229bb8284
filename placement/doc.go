// Package placement decides which pool, in which region, a task should run in.
//
// It is the pure core of docs/architecture.md §5: it takes plain values (a [Snapshot] of every pool's published
// figures, a [Task], the time) and returns a [Decision]; it does no I/O, starts no goroutines and
// imports nothing else of ax. Reading the etcd view, handing a task off to another region and
// mapping a failed decision to an HTTP status belong to the callers.
//
// A decision runs four steps. Filter: a pool must carry every tag of the task, sit in an allowed
// region whose figures are healthy and fresher than [Config.StaleAfter], have live slots (or scale
// from zero), be inside a capacity window that grants slots, and not be saturated; each rejected
// pool keeps a [Reason]. Score: expected cost in USD = effective price per slot-hour × expected
// duration of this task type in that pool (learnt from completions and kept by an [Estimator]; a
// pool without one takes the type's estimate in the other pools, then [Config.DefaultDuration]) ×
// a watermark penalty — 1 below the hard (spill) queue fill, [Config.PenaltyMax] at and above it,
// where only critical tasks go — plus an optional cross-region penalty; lowest wins, ties go to the pool with the lower published cost, then
// region, then name. Damping: a [Placer] counts its own placements into each pool's figures until
// that pool's next published figures arrive; a pool that has just become attractive to every
// server at once (new, back from unhealthy or stale, slots back, price dropped) is damped until
// then — each server claims only its share of its headroom (headroom ÷ [Config.Servers]) — so
// the servers do not all pour into it on the same figures (karmada-io/karmada#6518 is that failure).
// Other pools are not damped: whether a pool can take a task is its region's admission's call. Explain: [Placer.Explain] runs the same
// evaluation as [Placer.Place] and keeps every pool's reason and score parts, without counting a
// placement.
//
// A failed decision says why: [Decision.Unplaceable] (no pool could ever match, HTTP 422),
// [Decision.AllSaturated] (every matching pool is saturated, HTTP 429 with Retry-After), or neither
// (nothing fits now; the task stays PENDING with NO_CAPACITY). [Decision.Err] returns the matching
// sentinel.
//
// Build a [Snapshot] once per published view ([NewSnapshot]) and reuse it for many decisions: it
// sorts pools by their published cost and indexes them by tag and region, so [Placer.Place] touches
// only matching pools, stops at the first that cannot win, and does not allocate in the common
// case. Time is always passed in (now), never read from the clock.
package placement

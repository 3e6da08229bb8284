package placement

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Estimator holds how long each tenant's task types run in each pool: per (tenant, type, pool key),
// an estimate learnt from that tenant's completions, in an LRU bounded by Config.EstimatorSize.
// A tenant's tasks are placed by its own estimates only: another tenant's runs of a type of the
// same name never move them (a tenant could otherwise make a pool look slow or fast to others). Estimates arrive two ways:
// [Estimator.Set] takes one learnt elsewhere (in production, the region leaders publish what
// their stores learnt from every completion, and each server's view sets them here, so every
// server places with the same ones); [Estimator.Observe] folds one run into an exponentially
// weighted moving average. Entries are ordered by their last update (reads do not refresh them),
// so pairs that stopped completing are the first dropped. It is safe for concurrent use; share
// one between Placers.
//
// A pool with no estimate of a tenant's type takes the tenant's estimate of the type in the other
// pools of the snapshot (their means weighted by observation count, unscaled: how much faster one
// pool runs another type says little about this one), and the default only when no pool has one
// for the tenant: never another tenant's. Unscaled, an
// unknown pool is judged by its price against the known ones, as if it ran at their speed.
type Estimator struct {
	alpha float64
	// version counts changes, so a Placer knows when its copy of the estimates is behind.
	version atomic.Uint64

	// One lock around the plain LRU rather than lru.Cache's own: Observe's read-modify-write
	// must be atomic, and a Placer reads a whole type's estimates under a single read lock.
	mu  sync.RWMutex
	lru *simplelru.LRU[estKey, learnt]
}

type estKey struct{ tenant, typ, pool string }

// learnt is an Estimate in seconds.
type learnt struct {
	mean, variance float64
	count          int64
}

// Estimate is a learnt duration of a tenant's task type in one pool.
type Estimate struct {
	// Mean is the expected duration: a moving average of observed run times.
	Mean time.Duration
	// Spread is the standard deviation around Mean (0 when not known).
	Spread time.Duration
	// Count is the number of observations behind it.
	Count int64
}

// Source says where a pool's expected duration of a task type came from.
type Source string

const (
	// SourceLearnt: the pool's own estimate for the tenant's type.
	SourceLearnt Source = "learnt"
	// SourceTypeOtherPools: the pool has none; the tenant's estimates of the type in the other
	// pools, weighted by their observation counts.
	SourceTypeOtherPools Source = "type_other_pools"
	// SourceDefault: no pool has an estimate for the tenant's type: Config.DefaultDuration.
	SourceDefault Source = "default"
)

// shortestObservation: a task that finished faster still held a slot. It also keeps every
// estimate above zero, which the pruning of a decision's walk relies on to stop early.
const shortestObservation = time.Millisecond

// NewEstimator returns an empty Estimator sized and weighted by cfg.
func NewEstimator(cfg Config) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lru, err := simplelru.NewLRU[estKey, learnt](cfg.EstimatorSize, nil)
	if err != nil {
		return nil, err
	}
	return &Estimator{alpha: cfg.EWMAAlpha, lru: lru}, nil
}

// Observe folds one completed run of tenant's task of type typ in pool poolKey (Pool.Key) into
// its estimate: weight Config.EWMAAlpha for the new run (the first one is the estimate).
// Negative durations are ignored.
func (e *Estimator) Observe(tenant, typ, poolKey string, d time.Duration) {
	if d < 0 {
		return
	}
	x := max(d, shortestObservation).Seconds()
	k := estKey{tenant, typ, poolKey}
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.lru.Get(k)
	if ok {
		a := e.alpha
		diff := x - v.mean
		v.mean += a * diff
		v.variance = (1 - a) * (v.variance + a*diff*diff)
		v.count++
	} else {
		v = learnt{mean: x, count: 1}
	}
	e.lru.Add(k, v)
	e.version.Add(1)
}

// Set replaces the estimate of tenant's typ in poolKey with est, learnt elsewhere. A mean ≤ 0 is
// ignored; a count < 1 counts as 1.
func (e *Estimator) Set(tenant, typ, poolKey string, est Estimate) {
	if est.Mean <= 0 {
		return
	}
	v := learnt{mean: max(est.Mean, shortestObservation).Seconds(), variance: math.Pow(max(est.Spread, 0).Seconds(), 2),
		count: max(est.Count, 1)}
	k := estKey{tenant, typ, poolKey}
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.lru.Get(k); ok && old == v {
		return // refreshed in the LRU; nothing a Placer must reread
	}
	e.lru.Add(k, v)
	e.version.Add(1)
}

// Estimate returns the estimated duration of tenant's typ in poolKey, or known false when there
// is none.
func (e *Estimator) Estimate(tenant, typ, poolKey string) (d time.Duration, known bool) {
	est, ok := e.Lookup(tenant, typ, poolKey)
	return est.Mean, ok
}

// Lookup returns the estimate of tenant's typ in poolKey, or false when there is none.
func (e *Estimator) Lookup(tenant, typ, poolKey string) (Estimate, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	v, ok := e.lru.Peek(estKey{tenant, typ, poolKey})
	if !ok {
		return Estimate{}, false
	}
	return v.estimate(), true
}

func (v learnt) estimate() Estimate {
	return Estimate{Mean: seconds(v.mean), Spread: seconds(math.Sqrt(v.variance)), Count: v.count}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// table reads k's estimates for every pool of s, with the fallbacks for the pools without one.
func (e *Estimator) table(k tableKey, s *Snapshot, defaultHours float64, now int64) *durations {
	d := newDurations(len(s.pools), s.words)
	d.builtAt = now
	e.mu.RLock()
	defer e.mu.RUnlock()
	// Read the version under the lock: no observation can land between it and the values.
	d.version = e.version.Load()
	for i := range s.pools {
		if v, ok := e.lru.Peek(estKey{k.tenant, k.typ, s.pools[i].key}); ok {
			d.learn(i, v)
		}
	}
	d.fallback(defaultHours)
	return d
}

// carry moves prev, a table of the same key for an earlier snapshot, onto s: pools s shares
// with it (remap[i] is the index there, -1 for a new pool) keep their learnt values, new pools
// are read, and the fallbacks are worked out again. The result is as fresh as prev.
func (e *Estimator) carry(prev *durations, remap []int32, k tableKey, s *Snapshot, defaultHours float64) *durations {
	d := newDurations(len(s.pools), s.words)
	d.version, d.builtAt = prev.version, prev.builtAt
	locked := false
	for i, j := range remap {
		switch {
		case j >= 0:
			if prev.known.has(int(j)) {
				d.known.set(i)
				d.hours[i], d.spread[i], d.count[i] = prev.hours[j], prev.spread[j], prev.count[j]
			}
		default:
			if !locked {
				e.mu.RLock()
				defer e.mu.RUnlock()
				locked = true
			}
			if v, ok := e.lru.Peek(estKey{k.tenant, k.typ, s.pools[i].key}); ok {
				d.learn(i, v)
			}
		}
	}
	d.fallback(defaultHours)
	return d
}

// tableKey names a duration table: one tenant's task type.
type tableKey struct{ tenant, typ string }

// durations is one tenant's task type's expected duration in every pool of one snapshot.
type durations struct {
	version uint64 // of the Estimator it was read from
	builtAt int64  // decision time (Unix ns) it was read at
	hours   []float64
	spread  []float64 // hours; learnt pools only
	// count is the observations behind hours: the pool's own (learnt), or those of every pool
	// the fallback was taken from.
	count []int64
	known bitset  // learnt: the pool's own estimate
	other bitset  // the type's estimate in other pools
	floor float64 // the smallest of hours: the walk stops on it
}

func newDurations(pools, words int) *durations {
	return &durations{hours: make([]float64, pools), spread: make([]float64, pools), count: make([]int64, pools),
		known: make(bitset, words), other: make(bitset, words)}
}

func (d *durations) learn(i int, v learnt) {
	d.known.set(i)
	d.hours[i], d.spread[i], d.count[i] = v.mean/3600, math.Sqrt(v.variance)/3600, v.count
}

// fallback fills the pools without a learnt value: the count-weighted mean of the learnt ones,
// else defaultHours; then the floor.
func (d *durations) fallback(defaultHours float64) {
	var sum float64
	var n int64
	for i := range d.hours {
		if d.known.has(i) {
			sum += float64(d.count[i]) * d.hours[i]
			n += d.count[i]
		}
	}
	d.floor = math.Inf(1)
	for i := range d.hours {
		if !d.known.has(i) {
			d.spread[i] = 0
			if n > 0 {
				d.hours[i], d.count[i] = sum/float64(n), n
				d.other.set(i)
			} else {
				d.hours[i], d.count[i] = defaultHours, 0
			}
		}
		d.floor = min(d.floor, d.hours[i])
	}
}

// source names where pool i's value came from.
func (d *durations) source(i int) Source {
	switch {
	case d.known.has(i):
		return SourceLearnt
	case d.other.has(i):
		return SourceTypeOtherPools
	}
	return SourceDefault
}

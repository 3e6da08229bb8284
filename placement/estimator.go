package placement

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Estimator learns how long each task type runs in each pool: an exponentially weighted moving
// average per (type, pool key) of observed durations, in an LRU bounded by Config.EstimatorSize.
// Entries are ordered by their last observation (reads do not refresh them), so pairs that stopped
// completing are the first dropped. It is safe for concurrent use; share one between Placers.
type Estimator struct {
	alpha float64
	// version counts observations, so a Placer knows when its copy of the estimates is behind.
	version atomic.Uint64

	// One lock around the plain LRU rather than lru.Cache's own: Observe's read-modify-write
	// must be atomic, and a Placer reads a whole type's estimates under a single read lock.
	mu  sync.RWMutex
	lru *simplelru.LRU[estKey, float64] // seconds
}

type estKey struct{ typ, pool string }

// shortestObservation: a task that finished faster still held a slot. It also keeps every
// estimate above zero, which the pruning of a decision's walk relies on to stop early.
const shortestObservation = time.Millisecond

// NewEstimator returns an empty Estimator sized and weighted by cfg.
func NewEstimator(cfg Config) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lru, err := simplelru.NewLRU[estKey, float64](cfg.EstimatorSize, nil)
	if err != nil {
		return nil, err
	}
	return &Estimator{alpha: cfg.EWMAAlpha, lru: lru}, nil
}

// Observe folds one completed run of a task of type typ in pool poolKey (Pool.Key) into its
// estimate. Negative durations are ignored.
func (e *Estimator) Observe(typ, poolKey string, d time.Duration) {
	if d < 0 {
		return
	}
	x := max(d, shortestObservation).Seconds()
	k := estKey{typ, poolKey}
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.lru.Get(k); ok {
		x = e.alpha*x + (1-e.alpha)*v
	}
	e.lru.Add(k, x)
	e.version.Add(1)
}

// Estimate returns the estimated duration of typ in poolKey, or known false when there is none.
func (e *Estimator) Estimate(typ, poolKey string) (d time.Duration, known bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	s, ok := e.lru.Peek(estKey{typ, poolKey})
	return time.Duration(s * float64(time.Second)), ok
}

// table reads typ's estimates for every pool of s, in hours, with defaultHours where there is none.
func (e *Estimator) table(typ string, s *Snapshot, defaultHours float64, now int64) *durations {
	d := &durations{
		builtAt: now, hours: make([]float64, len(s.pools)), known: make(bitset, s.words),
		floor: math.Inf(1),
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	// Read the version under the lock: no observation can land between it and the values.
	d.version = e.version.Load()
	for i := range s.pools {
		h := defaultHours
		if sec, ok := e.lru.Peek(estKey{typ, s.pools[i].key}); ok {
			h = sec / 3600
			d.known.set(i)
		}
		d.hours[i] = h
		d.floor = min(d.floor, h)
	}
	return d
}

// carry moves prev, a table of the same type for an earlier snapshot, onto s: pools s shares
// with it (remap[i] is the index there, -1 for a new pool) keep their values, new pools are read.
// The result is as fresh as prev.
func (e *Estimator) carry(prev *durations, remap []int32, typ string, s *Snapshot, defaultHours float64) *durations {
	d := &durations{
		version: prev.version, builtAt: prev.builtAt, hours: make([]float64, len(s.pools)),
		known: make(bitset, s.words), floor: math.Inf(1),
	}
	locked := false
	for i, j := range remap {
		h := defaultHours
		switch {
		case j >= 0:
			h = prev.hours[j]
			if prev.known.has(int(j)) {
				d.known.set(i)
			}
		default:
			if !locked {
				e.mu.RLock()
				defer e.mu.RUnlock()
				locked = true
			}
			if sec, ok := e.lru.Peek(estKey{typ, s.pools[i].key}); ok {
				h = sec / 3600
				d.known.set(i)
			}
		}
		d.hours[i] = h
		d.floor = min(d.floor, h)
	}
	return d
}

// durations is one task type's expected duration in every pool of one snapshot.
type durations struct {
	version uint64 // of the Estimator it was read from
	builtAt int64  // decision time (Unix ns) it was read at
	hours   []float64
	known   bitset
	floor   float64 // the smallest of hours: the walk stops on it
}

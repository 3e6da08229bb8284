package region

import (
	"cmp"
	"context"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
)

// Defaults of the republisher.
const (
	// RepublishEveryDefault is how often it looks whether a value changed.
	RepublishEveryDefault = time.Second
	// RepublishAfterDefault is how long an unchanged value stays unwritten:
	// it is written again in case the store lost it (a Redis restarted
	// empty).
	RepublishAfterDefault = 30 * time.Second
)

// republishStore is what the republisher writes to the store. The *Move
// methods report whether a value's parts over the shards follow the
// shards' work, so that it must be written every round.
type republishStore interface {
	SetPrices(ctx context.Context, f queue.Fence, prices map[string]float64) error
	SetLimits(ctx context.Context, f queue.Fence, limits []queue.Limit) error
	LimitsMove(limits []queue.Limit) bool
	SetFairShare(ctx context.Context, f queue.Fence, pools map[string]queue.FairShare) error
	FairShareMoves(pools map[string]queue.FairShare) bool
}

// laneStore is what the republisher writes of the slow lanes.
type laneStore interface {
	SetSlowLanes(ctx context.Context, f queue.Fence, lanes map[string]queue.SlowLane) error
	SlowLanesMove(lanes map[string]queue.SlowLane) bool
}

var (
	_ republishStore = (*maint.Maintainer)(nil)
	_ laneStore      = (*maint.Maintainer)(nil)
)

// republisherConfig tunes the republisher; a nil source is a value the
// region does not keep.
type republisherConfig struct {
	Every time.Duration // RepublishEveryDefault
	After time.Duration // RepublishAfterDefault
	Pools []Pool
	// LivePrice returns a pool's price override per slot-hour.
	LivePrice func(pool string) (float64, bool)
	Limits    func() []queue.Limit
	FairShare func() map[string]queue.FairShare
	// SlowLanes returns the lanes as last collected (false: none yet).
	SlowLanes func() (map[string]queue.SlowLane, bool)
}

// republisher keeps in the store what claims follow and only the leader
// computes: each pool's live price, the region's limits, fair shares and
// slow lanes. Each is written when it changes, when its parts move, and
// again every After.
type republisher struct {
	startStop
	cfg  republisherConfig
	term *term
	kept []keeper
}

var _ service = (*republisher)(nil)

func newRepublisher(cfg republisherConfig, t *term, store republishStore, lanes laneStore) *republisher {
	cfg.Every = cmp.Or(max(cfg.Every, 0), RepublishEveryDefault)
	cfg.After = cmp.Or(max(cfg.After, 0), RepublishAfterDefault)
	s := &republisher{cfg: cfg, term: t}
	s.kept = append(s.kept, &kept[map[string]float64]{name: "prices", equal: maps.Equal[map[string]float64, map[string]float64],
		get: func() (map[string]float64, bool) { return livePrices(cfg.Pools, cfg.LivePrice), true }, write: store.SetPrices})
	if cfg.Limits != nil {
		s.kept = append(s.kept, &kept[[]queue.Limit]{name: "limits", equal: slices.Equal[[]queue.Limit],
			get: func() ([]queue.Limit, bool) { return cfg.Limits(), true }, moves: store.LimitsMove, write: store.SetLimits,
			snapshot: slices.Clone[[]queue.Limit]})
	}
	if cfg.FairShare != nil {
		s.kept = append(s.kept, &kept[map[string]queue.FairShare]{name: "fair share", equal: deepEqual[map[string]queue.FairShare],
			get: func() (map[string]queue.FairShare, bool) { return cfg.FairShare(), true }, moves: store.FairShareMoves, write: store.SetFairShare})
	}
	if cfg.SlowLanes != nil {
		s.kept = append(s.kept, &kept[map[string]queue.SlowLane]{name: "slow lanes", equal: deepEqual[map[string]queue.SlowLane],
			get: cfg.SlowLanes, moves: lanes.SlowLanesMove, write: lanes.SetSlowLanes})
	}
	return s
}

func (s *republisher) Start(ctx context.Context) { s.start(ctx, s.run) }

func (s *republisher) run(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Every)
	defer tick.Stop()
	for {
		for _, k := range s.kept {
			if k.keep(ctx, s.term, s.cfg.After) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// keeper is one value the republisher keeps in the store.
type keeper interface {
	// keep writes the value if it is due; true when the service must
	// return (term.failed).
	keep(ctx context.Context, t *term, after time.Duration) bool
}

// kept is a value of type T kept in the store: written when get gives one
// that differs from the last written, when moves says its parts move, or
// when the last write is older than after.
type kept[T any] struct {
	name     string
	get      func() (T, bool) // false: nothing to write now
	equal    func(a, b T) bool
	moves    func(T) bool // nil: its parts never move
	write    func(ctx context.Context, f queue.Fence, v T) error
	snapshot func(T) T // the copy remembered (nil: v itself)

	last    T
	written time.Time // zero: not written this term
}

var _ keeper = (*kept[int])(nil)

func (k *kept[T]) keep(ctx context.Context, t *term, after time.Duration) bool {
	v, ok := k.get()
	if !ok {
		return false
	}
	if !k.written.IsZero() && k.equal(v, k.last) && time.Since(k.written) <= after && (k.moves == nil || !k.moves(v)) {
		return false
	}
	if err := k.write(ctx, t.fence, v); err != nil {
		return t.failed(ctx, k.name, err)
	}
	if k.snapshot != nil {
		v = k.snapshot(v)
	}
	k.last, k.written = v, time.Now()
	return false
}

func deepEqual[T any](a, b T) bool { return reflect.DeepEqual(a, b) }

// livePrices is each pool's price per slot-hour now: its override, else
// its configured price, after its discount (what a worker of the pool is
// configured to record).
func livePrices(pools []Pool, override func(pool string) (float64, bool)) map[string]float64 {
	out := make(map[string]float64, len(pools))
	for _, p := range pools {
		price := p.PricePerSlotHour
		if override != nil {
			if o, ok := override(p.Name); ok {
				price = o
			}
		}
		out[p.Name] = price * (1 - p.Discount)
	}
	return out
}

package region

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
	"github.com/ax-sched/ax/task"
)

// MaxSleepDefault is the longest the promoter and the reaper sleep between
// passes when nothing is due sooner.
const MaxSleepDefault = time.Second

// promoteStore is what the promoter asks of the store.
type promoteStore interface {
	Promote(ctx context.Context, f queue.Fence, limit int, opt ...queue.PromoteOptions) (queue.PromoteResult, error)
	DueTasks(ctx context.Context, limit int) ([]*task.Task, error)
	Place(ctx context.Context, f queue.Fence, as []queue.Assignment) (queue.PlaceResult, error)
}

var _ promoteStore = (*maint.Maintainer)(nil)

// promoterConfig tunes the promoter.
type promoterConfig struct {
	// MaxSleep is the longest it sleeps (MaxSleepDefault).
	MaxSleep time.Duration
	// ReadmitRate is how many preempted tasks it re-admits a second
	// (ReadmitRateDefault; negative: no limit).
	ReadmitRate float64
}

// promoter makes due tasks READY, sleeping until the next due time the
// store reports or until woken, and places the tasks waiting for
// placement through the Placer, deferring low priorities bound for a hot
// pool.
type promoter struct {
	startStop
	cfg      promoterConfig
	term     *term
	store    promoteStore
	placer   Placer
	pressure *pressures
	metrics  *Metrics
	wake     <-chan struct{}
}

var _ service = (*promoter)(nil)

func newPromoter(cfg promoterConfig, t *term, store promoteStore, p Placer, ps *pressures, m *Metrics, wake <-chan struct{}) *promoter {
	cfg.MaxSleep = cmp.Or(max(cfg.MaxSleep, 0), MaxSleepDefault)
	cfg.ReadmitRate = cmp.Or(cfg.ReadmitRate, ReadmitRateDefault)
	return &promoter{cfg: cfg, term: t, store: store, placer: p, pressure: ps, metrics: m, wake: wake}
}

func (s *promoter) Start(ctx context.Context) { s.start(ctx, s.run) }

func (s *promoter) run(ctx context.Context) {
	readmit := newBucket(s.cfg.ReadmitRate, max(s.cfg.ReadmitRate, 1))
	region := s.term.region
	for ctx.Err() == nil {
		hot, spread := s.pressure.hot()
		res, err := s.store.Promote(ctx, s.term.fence, queue.MaxBatch, queue.PromoteOptions{
			Readmit: readmit.available(time.Now()), HotPools: hot, Spread: spread,
		})
		if err != nil {
			if s.term.failed(ctx, "promote", err) {
				return
			}
			continue
		}
		readmit.take(res.Readmit)
		s.metrics.promoted.WithLabelValues(region).Add(float64(res.Moved))
		if res.Deferred > 0 {
			s.metrics.deferred.WithLabelValues(region).Add(float64(res.Deferred))
		}
		if err := s.placeDue(ctx); err != nil {
			if s.term.failed(ctx, "place", err) {
				return
			}
			continue
		}
		if res.Moved == queue.MaxBatch {
			continue // more are due now
		}
		if !sleep(ctx, untilNext(res.NextDue, s.cfg.MaxSleep), s.wake) {
			return
		}
	}
}

// placeDue places the tasks waiting for placement, a batch at a time.
func (s *promoter) placeDue(ctx context.Context) error {
	for ctx.Err() == nil {
		due, err := s.store.DueTasks(ctx, queue.MaxBatch)
		if err != nil || len(due) == 0 {
			return err
		}
		as, deferred := s.pressure.backpressure(due, s.placer.PlaceDue(ctx, due), time.Now())
		if deferred > 0 {
			s.metrics.deferred.WithLabelValues(s.term.region).Add(float64(deferred))
		}
		if len(as) == 0 {
			return nil
		}
		res, err := s.store.Place(ctx, s.term.fence, as)
		if err != nil {
			return err
		}
		s.metrics.placed.WithLabelValues(s.term.region).Add(float64(res.Placed))
		if len(due) < queue.MaxBatch {
			return nil
		}
	}
	return ctx.Err()
}

// bucket is a token bucket (re-admission of preempted work).
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate, burst float64) *bucket {
	return &bucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// available refills and returns the whole tokens now (−1 when unlimited).
func (b *bucket) available(now time.Time) int {
	if b.rate <= 0 {
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	return int(b.tokens)
}

func (b *bucket) take(n int) {
	b.mu.Lock()
	b.tokens -= float64(n)
	b.mu.Unlock()
}

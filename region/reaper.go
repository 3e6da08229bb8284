package region

import (
	"cmp"
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
)

// reapStore is what the reaper asks of the store.
type reapStore interface {
	Reap(ctx context.Context, f queue.Fence, limit int) (int, time.Time, error)
}

var _ reapStore = (*maint.Maintainer)(nil)

// reaperConfig tunes the reaper.
type reaperConfig struct {
	MaxSleep time.Duration // the longest it sleeps (MaxSleepDefault)
}

// reaper moves tasks whose lease expired on (retry or dead letter),
// sleeping until the next expiry, and wakes the promoter after reaping
// (reaped tasks may be due for retry soon).
type reaper struct {
	startStop
	cfg     reaperConfig
	term    *term
	store   reapStore
	metrics *Metrics
	wake    func()
}

var _ service = (*reaper)(nil)

func newReaper(cfg reaperConfig, t *term, store reapStore, m *Metrics, wake func()) *reaper {
	cfg.MaxSleep = cmp.Or(max(cfg.MaxSleep, 0), MaxSleepDefault)
	return &reaper{cfg: cfg, term: t, store: store, metrics: m, wake: wake}
}

func (s *reaper) Start(ctx context.Context) { s.start(ctx, s.run) }

func (s *reaper) run(ctx context.Context) {
	for ctx.Err() == nil {
		n, next, err := s.store.Reap(ctx, s.term.fence, queue.MaxBatch)
		if err != nil {
			if s.term.failed(ctx, "reap", err) {
				return
			}
			continue
		}
		if n > 0 {
			s.metrics.reaped.WithLabelValues(s.term.region).Add(float64(n))
			s.term.log.Info("reaped expired leases", "n", n)
			s.wake()
		}
		if n == queue.MaxBatch {
			continue
		}
		if !sleep(ctx, untilNext(next, s.cfg.MaxSleep), nil) {
			return
		}
	}
}

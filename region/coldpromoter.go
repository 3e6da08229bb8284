package region

import (
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
)

// coldEveryMax is the longest the cold promoter sleeps.
const coldEveryMax = 30 * time.Second

// coldStore is what the cold promoter asks of the store.
type coldStore interface {
	PromoteCold(ctx context.Context, f queue.Fence, limit int) (int, time.Time, error)
}

var _ coldStore = (*maint.Maintainer)(nil)

// coldPromoterConfig tunes the cold promoter.
type coldPromoterConfig struct {
	// Horizon is the store's cold horizon (queue.Options.ColdHorizon);
	// zero or less: no cold tier, the service does nothing.
	Horizon time.Duration
}

// coldPromoter moves cold delayed tasks (queue/cold.go) to the hot delayed
// sets ahead of their time: each pass takes the buckets starting within
// half the horizon, in bounded fenced scripts, then sleeps until the next
// bucket is that close, at most a quarter horizon (coldEveryMax at most),
// so a bucket is moved at least a quarter horizon before it is due.
type coldPromoter struct {
	startStop
	cfg   coldPromoterConfig
	term  *term
	store coldStore
}

var _ service = (*coldPromoter)(nil)

func newColdPromoter(cfg coldPromoterConfig, t *term, store coldStore) *coldPromoter {
	return &coldPromoter{cfg: cfg, term: t, store: store}
}

func (s *coldPromoter) Start(ctx context.Context) { s.start(ctx, s.run) }

func (s *coldPromoter) run(ctx context.Context) {
	horizon := s.cfg.Horizon
	if horizon <= 0 {
		return
	}
	every := min(coldEveryMax, horizon/4)
	for ctx.Err() == nil {
		n, next, err := s.store.PromoteCold(ctx, s.term.fence, queue.MaxBatch)
		if err != nil {
			if s.term.failed(ctx, "promote cold", err) {
				return
			}
			continue
		}
		if n >= queue.MaxBatch {
			continue // more are within reach now
		}
		wait := every
		if !next.IsZero() {
			wait = min(every, max(time.Until(next.Add(-horizon/2)), time.Second))
		}
		if !sleep(ctx, wait, nil) {
			return
		}
	}
}

package region

import (
	"cmp"
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
)

// SweepIdleDefault is the sweeper's period while it is caught up (well
// within queue.SweepAlive).
const SweepIdleDefault = 10 * time.Second

// sweepStore is what the sweeper asks of the store.
type sweepStore interface {
	Sweep(ctx context.Context, f queue.Fence, limit int) (queue.Swept, error)
}

var _ sweepStore = (*maint.Maintainer)(nil)

// sweeperConfig tunes the sweeper.
type sweeperConfig struct {
	Idle time.Duration // its period while caught up (SweepIdleDefault)
}

// sweeper keeps the retention of dead letters and finished tasks
// (maint.Maintainer.Sweep). While records past their retention are left it
// sweeps again after a pause as long as the last sweep took, so it takes
// at most half of Redis's time and still outpaces any completion rate a
// Redis sustains; caught up, it sweeps every Idle. It exports the sweep's
// lag, and zero when it stops (the next leader's figure).
type sweeper struct {
	startStop
	cfg     sweeperConfig
	term    *term
	store   sweepStore
	metrics *Metrics
}

var _ service = (*sweeper)(nil)

func newSweeper(cfg sweeperConfig, t *term, store sweepStore, m *Metrics) *sweeper {
	cfg.Idle = cmp.Or(max(cfg.Idle, 0), SweepIdleDefault)
	return &sweeper{cfg: cfg, term: t, store: store, metrics: m}
}

func (s *sweeper) Start(ctx context.Context) { s.start(ctx, s.run) }

func (s *sweeper) run(ctx context.Context) {
	lag := s.metrics.sweepLag.WithLabelValues(s.term.region)
	defer lag.Set(0)
	for {
		start := time.Now()
		r, err := s.store.Sweep(ctx, s.term.fence, queue.MaxBatch)
		if err != nil {
			if s.term.failed(ctx, "sweep", err) {
				return
			}
			continue
		}
		lag.Set(r.Lag.Seconds())
		wait := s.cfg.Idle
		if r.Left {
			wait = time.Since(start)
		}
		if !sleep(ctx, wait, nil) {
			return
		}
	}
}

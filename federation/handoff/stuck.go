package handoff

import (
	"context"
	"errors"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// StuckPoolLoop (a region leader loop) re-places the READY tasks of a pool
// that lost all its workers, after Config.StuckPoolGrace, through the same
// rate-limited hand-off as a drain. Pools that scale from zero are left
// alone: their workers start on demand.
// Its moves are fenced: a deposed leader's loop changes nothing and ends
// the term (lost).
func (n *Mover) StuckPoolLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	since := map[string]time.Time{}
	every(ctx, min(time.Second, n.cfg.StuckPoolGrace/4), func() bool {
		if n.cell == nil {
			return true
		}
		now := n.cfg.Now()
		for _, p := range n.cell.Figures().Pools {
			if p.Workers > 0 || p.Ready == 0 || p.ScaleFromZero {
				delete(since, p.Name)
				continue
			}
			if since[p.Name].IsZero() {
				since[p.Name] = now
				continue
			}
			if now.Sub(since[p.Name]) < n.cfg.StuckPoolGrace {
				continue
			}
			moved, err := n.drain(ctx, p.Name, 200, &f)
			if errors.Is(err, queue.ErrFenced) {
				lost(err)
				return false
			}
			if err != nil && ctx.Err() == nil {
				n.log.Warn("re-placing a pool without workers", "pool", p.Name, "err", err)
				continue
			}
			if moved > 0 {
				n.log.Info("re-placed READY tasks of a pool without workers", "pool", p.Name, "moved", moved, "reason", task.ReasonDrained)
			}
			since[p.Name] = now // try again after another grace period
		}
		return true
	})
}

// every calls f every d until ctx ends or f returns false: the rhythm of
// the node's ticking leader loops.
func every(ctx context.Context, d time.Duration, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !f() {
			return
		}
	}
}

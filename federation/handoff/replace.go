package handoff

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
)

// Re-placement when the world changes: READY tasks wait in a
// pool chosen with the prices and windows of their submit. When the pool's
// live price rises past Config.ReplaceOnPriceRise × its configured price
// (a spot spike) or its capacity window closes, the ones placement would
// now send elsewhere go back to placement (maint.Maintainer.Replace: READY →
// PENDING, REPLACED_COST, into the due set, fenced; the place loop then
// places them with the figures of now, like any due task).

const (
	// replaceBatch bounds the tasks one pool gives back per round, and
	// replaceEvery spaces the rounds: at most 100 tasks a second per pool,
	// so a spike does not become a storm of hand-offs.
	replaceBatch = 200
	replaceEvery = 2 * time.Second
)

// ReplaceLoop (a region leader loop) re-places the READY tasks of this
// region's pools whose price rose past the threshold or whose capacity
// window closed. Pinned tasks stay (the store skips them); a deposed
// leader's moves are refused and end the term (lost).
func (n *Mover) ReplaceLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	every(ctx, replaceEvery, func() bool {
		if n.cell == nil {
			return true
		}
		for _, p := range n.cell.Figures().Pools {
			why := n.replaceWhy(p, n.cfg.Now())
			if why == "" || p.Ready == 0 {
				continue
			}
			moved, err := n.replacePool(ctx, f, p.Name, why)
			if errors.Is(err, queue.ErrFenced) {
				lost(err)
				return false
			}
			if err != nil && ctx.Err() == nil {
				n.log.Warn("re-placing READY tasks", "pool", p.Name, "why", why, "err", err)
				continue
			}
			if moved > 0 {
				n.log.Info("re-placed READY tasks", "pool", p.Name, "moved", moved, "why", why, "reason", task.ReasonReplacedCost)
				n.cell.Wake()
			}
		}
		return true
	})
}

// replaceWhy says why pool p's READY tasks should be placed again now, ""
// when they should not: its live price at or past the threshold × its
// configured price, or its capacity window closed.
func (n *Mover) replaceWhy(p region.PoolFigures, now time.Time) string {
	if x := n.cfg.ReplaceOnPriceRise; x > 1 && p.PricePerSlotHour > 0 {
		if live, ok := n.view.PriceOverride(n.cfg.Region, p.Name); ok && live >= x*p.PricePerSlotHour {
			return fmt.Sprintf("price $%g/h ≥ %g × the configured $%g/h", live, x, p.PricePerSlotHour)
		}
	}
	if slots, in := view.WindowOf(p.Schedule).SlotsAt(now, p.Slots); in && slots == 0 && !p.ScaleFromZero {
		return "capacity window closed"
	}
	return ""
}

// replacePool gives back up to replaceBatch READY tasks of pool that
// placement, on the view of now, sends to another pool.
func (n *Mover) replacePool(ctx context.Context, f queue.Fence, pool, why string) (int, error) {
	now := n.cfg.Now()
	snap := n.view.Pools()
	var ids []string
	errEnough := errors.New("enough")
	err := n.store.Tasks().Waiting(ctx, queue.Filter{State: task.Ready, Pool: pool}, func(ts []*task.Task) error {
		for _, t := range ts {
			if t.Pinned {
				continue
			}
			ex := n.picker.ExplainTask(snap, n.picker.Stored(t, t.Regions), t.MaxPricePerSlotHour, now)
			if d := ex.Decision; !d.OK || d.Region == n.cfg.Region && d.Pool == pool {
				continue // nowhere better now: it keeps its place
			}
			if ids = append(ids, t.ID); len(ids) >= replaceBatch {
				return errEnough
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return n.store.Maintainer().Replace(ctx, f, pool, why, ids)
}

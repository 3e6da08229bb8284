package handoff

import (
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Drain moves READY tasks of this region to pools elsewhere through the
// hand-off outbox, at most rate per second. It returns how many it moved.
func (n *Mover) Drain(ctx context.Context, rate int) (int, error) {
	return n.drain(ctx, "", rate, nil)
}

// drain moves READY tasks of one pool ("" = every pool) elsewhere; a leader
// loop passes its fence (nil: an operator's drain).
func (n *Mover) drain(ctx context.Context, pool string, rate int, f *queue.Fence) (int, error) {
	if rate <= 0 {
		rate = 200
	}
	now := n.cfg.Now()
	vs := n.view.Current()
	snap := vs.Pools
	moved := 0
	var batch []queue.DrainMove
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var fs []queue.Fence
		if f != nil {
			fs = append(fs, *f)
		}
		k, err := n.store.HandOffs().Drain(ctx, batch, fs...)
		moved += k
		batch = batch[:0]
		if err != nil {
			return err
		}
		// Rate limit: rate tasks per second.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(k) * time.Second / time.Duration(rate)):
		}
		return nil
	}
	err := n.store.Tasks().Waiting(ctx, queue.Filter{State: task.Ready, Pool: pool}, func(ts []*task.Task) error {
		for _, t := range ts {
			pt := n.picker.Stored(t, without(t.Regions, n.cfg.Region, n.cfg.Regions))
			d := n.picker.Decide(snap, pt, t.MaxPricePerSlotHour, now)
			if !d.OK || d.Region == n.cfg.Region {
				continue // nowhere else to go now: it stays
			}
			n.metrics.Decision(n.cfg.Region, d)
			batch = append(batch, queue.DrainMove{ID: t.ID, Region: d.Region, Pool: d.Pool})
			n.flights.Add(t.ID, d.Region, d.Pool, vs.Updated[d.Region], now)
			if len(batch) >= min(rate, 500) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return moved, err
	}
	return moved, flush()
}

// without returns the allowed regions minus one (all regions when allowed
// is empty).
func without(allowed []string, drop string, all []string) []string {
	src := allowed
	if len(src) == 0 {
		src = all
	}
	out := make([]string, 0, len(src))
	for _, r := range src {
		if r != drop {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return []string{"-"} // nothing allowed
	}
	return out
}

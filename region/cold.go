package region

import (
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
)

// coldLoop moves cold delayed tasks (queue/cold.go) to the hot delayed sets
// ahead of their time: each pass takes the buckets starting within half the
// store's cold horizon, in bounded fenced scripts, then sleeps until the
// next bucket is that close, at most a quarter horizon (30 s at most), so
// a bucket is moved at least a quarter horizon before it is due.
func (c *Cell) coldLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	horizon := c.store.Options().ColdHorizon
	if horizon <= 0 {
		return
	}
	every := min(30*time.Second, horizon/4)
	for ctx.Err() == nil {
		n, next, err := c.store.PromoteCold(ctx, f, queue.MaxBatch)
		if err != nil {
			if c.failed(ctx, "promote cold", err, lost) {
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
		if !c.sleep(ctx, wait, nil) {
			return
		}
	}
}

package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/worker"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

// BenchmarkNoopThroughput runs b.N noop tasks, submitted up front, through
// workers of the same pool: claim, run, ack, end to end. fair: the pool has
// a fair share, so each claim first waits for the successes queued to be
// recorded (queue.Claimed.Counts).
func BenchmarkNoopThroughput(b *testing.B) {
	for _, c := range []struct {
		workers, slots int
		fair           bool
	}{{1, 16, false}, {2, 64, false}, {1, 16, true}} {
		name := fmt.Sprintf("workers=%d/slots=%d", c.workers, c.slots)
		if c.fair {
			name += "/fair"
		}
		b.Run(name, func(b *testing.B) {
			e := wt.New(b)
			if c.fair {
				err := e.Store.Maintainer().SetFairShare(e.Ctx, queue.Fence{Name: "t", Token: 1},
					map[string]queue.FairShare{wt.Pool: {Tenants: map[string]queue.TenantShare{"a": {Floor: 2}}}})
				if err != nil {
					b.Fatal(err)
				}
			}
			e.Submit("noop", nil, b.N)
			b.ResetTimer()
			start := time.Now()
			var ws []*worker.Worker
			for i := range c.workers {
				w := e.Worker(worker.Options{ID: fmt.Sprintf("w%d", i), Concurrency: c.slots, Logger: wt.Logger(b, 100)})
				w.Handle("noop", func(context.Context, *worker.Task) error { return nil })
				e.Run(w)
				ws = append(ws, w)
			}
			for {
				var done uint64
				for _, w := range ws {
					done += w.Stats().Succeeded
				}
				if done >= uint64(b.N) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}

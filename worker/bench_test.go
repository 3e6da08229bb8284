package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/worker"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

// BenchmarkNoopThroughput runs b.N noop tasks, submitted up front, through
// workers of the same pool: claim, run, ack, end to end.
func BenchmarkNoopThroughput(b *testing.B) {
	for _, c := range []struct{ workers, slots int }{{1, 16}, {2, 64}} {
		b.Run(fmt.Sprintf("workers=%d/slots=%d", c.workers, c.slots), func(b *testing.B) {
			e := wt.New(b)
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

package worker_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/ax-sched/ax/worker"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

// BenchmarkIdlePickup measures how long an idle worker (blocked on its
// wake-up marker) takes from submit to handler start; it reports p50, p99
// and max over b.N pickups.
func BenchmarkIdlePickup(b *testing.B) {
	e := wt.New(b)
	started := make(chan time.Time, 1)
	w := e.Worker(worker.Options{ID: "idle", Concurrency: 4, Logger: wt.Logger(b, 100)})
	w.Handle("noop", func(context.Context, *worker.Task) error {
		started <- time.Now()
		return nil
	})
	e.Run(w)
	time.Sleep(200 * time.Millisecond) // let it go idle
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		e.Submit("noop", nil, 1)
		select {
		case t1 := <-started:
			lat = append(lat, t1.Sub(t0))
		case <-time.After(5 * time.Second):
			b.Fatal("no pickup within 5 s")
		}
		b.StopTimer()
		time.Sleep(30 * time.Millisecond) // idle again: blocked on the marker
		b.StartTimer()
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
}

package region

import (
	"math"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
)

// Drain is the growth of the run-time counts: a trimmed pair, or one that
// comes back after a trim, reads as neither a drop nor a burst.
func TestDrainRates(t *testing.T) {
	d := newDrainRates()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rt := func(pool, typ string, n int64) queue.RunTime { return queue.RunTime{Pool: pool, Type: typ, Count: n} }
	steps := []struct {
		sec  int
		rts  []queue.RunTime
		want map[string]float64
	}{
		{0, []queue.RunTime{rt("cpu", "a", 1000), rt("cpu", "b", 10)}, map[string]float64{"cpu": 0}},
		{10, []queue.RunTime{rt("cpu", "a", 1040), rt("cpu", "b", 20), rt("gpu", "t", 5)},
			map[string]float64{"cpu": 5, "gpu": 0}},
		// "b" trimmed, "a" grew by 30; "gpu" grew by 10.
		{20, []queue.RunTime{rt("cpu", "a", 1070), rt("gpu", "t", 15)}, map[string]float64{"cpu": 4, "gpu": 1}},
		// "b" back with 2 new runs.
		{30, []queue.RunTime{rt("cpu", "a", 1070), rt("cpu", "b", 2), rt("gpu", "t", 15)},
			map[string]float64{"cpu": 82. / 30, "gpu": 0.5}},
	}
	for _, s := range steps {
		got := d.observe(t0.Add(time.Duration(s.sec)*time.Second), s.rts)
		for pool, want := range s.want {
			if math.Abs(got[pool]-want) > 1e-9 {
				t.Fatalf("at %d s: %s drains %v/s, want %v (all %v)", s.sec, pool, got[pool], want, got)
			}
		}
	}
}

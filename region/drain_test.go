package region

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
)

// Drain is the growth of the run-time counts: a trimmed pair, or one that
// comes back after a trim, reads as neither a drop nor a burst.
func TestDrainCounts(t *testing.T) {
	d := newDrainRates()
	rt := func(pool, typ string, n int64) queue.RunTime { return queue.RunTime{Pool: pool, Type: typ, Count: n} }
	steps := []struct {
		rts  []queue.RunTime
		want map[string]int64
	}{
		{[]queue.RunTime{rt("cpu", "a", 1000), rt("cpu", "b", 10)}, map[string]int64{}}, // history
		{[]queue.RunTime{rt("cpu", "a", 1040), rt("cpu", "b", 20), rt("gpu", "t", 5)}, map[string]int64{"cpu": 50, "gpu": 5}},
		// "b" trimmed, "a" grew by 30; "gpu" grew by 10.
		{[]queue.RunTime{rt("cpu", "a", 1070), rt("gpu", "t", 15)}, map[string]int64{"cpu": 80, "gpu": 15}},
		// "b" back with 2 new runs.
		{[]queue.RunTime{rt("cpu", "a", 1070), rt("cpu", "b", 2), rt("gpu", "t", 15)}, map[string]int64{"cpu": 82, "gpu": 15}},
	}
	for i, s := range steps {
		got := d.count(s.rts)
		for pool, want := range s.want {
			if got[pool] != want {
				t.Fatalf("step %d: %s counted %d, want %d (all %v)", i, pool, got[pool], want, got)
			}
		}
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var r float64
	for s := 0; s <= 40; s++ {
		r = d.rate("cpu", t0.Add(time.Duration(s)*time.Second), int64(2*s), 8, 8)
	}
	if r != 2 {
		t.Fatalf("rate %v, want 2", r)
	}
}

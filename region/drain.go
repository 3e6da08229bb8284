package region

import (
	"time"

	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
)

// drainWindow is what a published drain rate averages over: long enough
// that batches of completions read as a steady rate, short enough that a
// pool losing half its workers shows within a publication or two of
// placement caring (its queue is then judged by the slower rate).
const drainWindow = 30 * time.Second

// drainRates turns the store's learnt run-time counts into each pool's
// finished tasks per second. Every completion and handler failure folds
// one observation into its (pool, type) count, so the counts' growth is
// what the pool drained. A pair trimmed from the store or seen again after
// a trim must not read as a drop or a burst: only growth of a pair seen at
// the previous reading counts, and a new pair counts its own count (it was
// first completed since, or came back small). Owned by the house loop.
type drainRates struct {
	last   map[[2]string]int64 // (pool, type) → count at the previous reading
	total  map[string]int64    // pool → finished tasks counted so far
	meters map[string]*placement.DrainMeter
	read   bool // a reading was taken
}

func newDrainRates() *drainRates {
	return &drainRates{last: map[[2]string]int64{}, total: map[string]int64{}, meters: map[string]*placement.DrainMeter{}}
}

// observe reads rts at now and returns each pool's rate (tasks/s).
func (d *drainRates) observe(now time.Time, rts []queue.RunTime) map[string]float64 {
	first := !d.read
	d.read = true
	seen := make(map[[2]string]int64, len(rts))
	for _, r := range rts {
		k := [2]string{r.Pool, r.Type}
		seen[k] = r.Count
		prev, ok := d.last[k]
		switch {
		case first:
			// The first reading of a term: the counts are history, not drain.
		case ok && r.Count >= prev:
			d.total[r.Pool] += r.Count - prev
		case !ok:
			d.total[r.Pool] += r.Count
		}
		if _, ok := d.meters[r.Pool]; !ok {
			d.meters[r.Pool] = placement.NewDrainMeter(drainWindow)
		}
	}
	d.last = seen
	out := make(map[string]float64, len(d.meters))
	for pool, m := range d.meters {
		out[pool] = m.Observe(now, d.total[pool])
	}
	return out
}

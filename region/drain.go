package region

import (
	"time"

	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
)

// drainWindow is the longest a published drain rate averages over (the
// meter uses at least 30 s and 20 completions): long enough for a pool of
// long tasks to have finished a few, short enough to follow a pool that
// lost workers within minutes.
const drainWindow = 10 * time.Minute

// drainRates turns the store's learnt run-time counts into each pool's
// finished tasks per second. Every completion and handler failure folds
// one observation into its (pool, type, tenant) count, so the counts' growth is
// what the pool drained. A pair trimmed from the store or seen again after
// a trim must not read as a drop or a burst: only growth of a pair seen at
// the previous reading counts, and a new pair counts its own count (it was
// first completed since, or came back small). Owned by the house loop.
type drainRates struct {
	last   map[[3]string]int64 // (pool, type, tenant) → count at the previous reading
	total  map[string]int64    // pool → finished tasks counted so far
	meters map[string]*placement.DrainMeter
	read   bool // a reading was taken
}

func newDrainRates() *drainRates {
	return &drainRates{last: map[[3]string]int64{}, total: map[string]int64{}, meters: map[string]*placement.DrainMeter{}}
}

// count reads rts and returns each pool's finished tasks counted so far.
func (d *drainRates) count(rts []queue.RunTime) map[string]int64 {
	first := !d.read
	d.read = true
	seen := make(map[[3]string]int64, len(rts))
	for _, r := range rts {
		k := [3]string{r.Pool, r.Type, r.Tenant}
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
	}
	d.last = seen
	return d.total
}

// rate is pool's saturated drain rate (tasks/s) at now, given its count
// (from count), the room its running tasks hold and its live slots (in
// the same unit).
func (d *drainRates) rate(pool string, now time.Time, count int64, running, slots int) float64 {
	m, ok := d.meters[pool]
	if !ok {
		m = placement.NewDrainMeter(drainWindow)
		d.meters[pool] = m
	}
	return m.Observe(now, count, running, slots)
}

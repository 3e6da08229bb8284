package costsim

import (
	"container/heap"
	"math"

	"github.com/ax-sched/ax/placement"
)

// Retry delays of a submission no pool took: a 429's Retry-After (the client submits again),
// and federation's NoCapacityRetry (the leader places it again).
const (
	retrySaturated  = 1.0
	retryNoCapacity = 2.0
)

// axPolicy is the real placement package: per region, ServersPerRegion servers with a Placer
// each (their damping counts are their own), fed the region's view.
type axPolicy struct {
	placers [][]*placement.Placer
	next    []int
}

func newAxPolicy(w *world) (*axPolicy, error) {
	a := &axPolicy{placers: make([][]*placement.Placer, len(w.regions)), next: make([]int, len(w.regions))}
	for h := range a.placers {
		for range max(1, w.s.ServersPerRegion) {
			p, err := placement.NewPlacer(w.cfg, w.est)
			if err != nil {
				return nil, err
			}
			a.placers[h] = append(a.placers[h], p)
		}
	}
	return a, nil
}

func (a *axPolicy) place(w *world, k, h int) (int, float64) {
	snap, err := w.snapshot(h)
	if err != nil {
		panic(err) // the scenario's pools were validated when the first snapshot was built
	}
	ty := &w.s.Types[w.tasks[k].typ]
	pl := a.placers[h][a.next[h]%len(a.placers[h])]
	a.next[h]++
	d := pl.Place(snap, placement.Task{Type: ty.Name, Tags: ty.Tags, Priority: 2, Home: w.regions[h].name}, w.at(w.now))
	switch {
	case d.OK:
		if d.OverTarget {
			w.res.OverTarget++
		}
		return w.snapIdx[h][d.Index], 0
	case d.AllSaturated():
		return -1, retrySaturated
	}
	return -1, retryNoCapacity
}

// eligible lists the pools of h's view a task of type k could go to by the filters alone:
// tags, a healthy fresh region, slots now.
func (w *world) eligible(k, h int) []int {
	if _, err := w.snapshot(h); err != nil {
		panic(err)
	}
	var out []int
	stale := w.cfg.StaleAfter.Seconds()
	for j, f := range w.snapPools[h] {
		i := w.snapIdx[h][j]
		if !f.RegionHealthy || w.now-float64(f.UpdatedAt.Sub(w.start))/1e9 > stale || !w.matches(k, i) || w.slotsAt(i, w.now) == 0 {
			continue
		}
		out = append(out, i)
	}
	return out
}

// roundRobin sends each task to the next eligible pool in turn.
type roundRobin struct{ n int }

func (r *roundRobin) place(w *world, k, h int) (int, float64) {
	el := w.eligible(k, h)
	if len(el) == 0 {
		return -1, retryNoCapacity
	}
	r.n++
	return el[r.n%len(el)], 0
}

// cheapest sends each task to the eligible pool with the lowest published price per slot-hour.
type cheapest struct{}

func (cheapest) place(w *world, k, h int) (int, float64) {
	best, bestPrice := -1, math.Inf(1)
	for _, i := range w.eligible(k, h) {
		for j, f := range w.snapPools[h] {
			if w.snapIdx[h][j] == i {
				if p := f.PricePerSlotHour * (1 - f.Discount); p < bestPrice {
					best, bestPrice = i, p
				}
			}
		}
	}
	if best < 0 {
		return -1, retryNoCapacity
	}
	return best, 0
}

// hindsight knows each task's true run time in every pool, every price of the day, the exact
// queues and which regions are down. Greedy: each task goes where it costs least among the
// pools where it would start within the wait target, else where it would start first.
type hindsight struct{}

func (hindsight) place(w *world, k, _ int) (int, float64) {
	best, bestCost := -1, math.Inf(1)
	least, leastStart, leastCost := -1, math.Inf(1), math.Inf(1)
	for i := range w.pools {
		p := &w.pools[i]
		if w.regions[p.region].down || !w.matches(k, i) {
			continue
		}
		start, ok := w.startOf(k, i)
		if !ok {
			continue
		}
		cost := w.price(i, start) * w.duration(k, i) / 3600
		// The same target as placement's: the pool's, else the default.
		target := w.s.MaxWait
		if m := p.spec.MaxWait; m > 0 {
			target = m
		}
		if (target <= 0 || start-w.now <= target.Seconds()) && cost < bestCost {
			best, bestCost = i, cost
		}
		if start < leastStart || (start == leastStart && cost < leastCost) {
			least, leastStart, leastCost = i, start, cost
		}
	}
	switch {
	case best >= 0:
		return best, 0
	case least >= 0:
		w.res.OverTarget++
		return least, 0
	}
	return -1, retryNoCapacity
}

// startOf is when task k would start if appended to pool i's queue now (false: never, today).
func (w *world) startOf(k, i int) (float64, bool) {
	p := &w.pools[i]
	if p.spec.Window != nil {
		return w.simulateStart(k, i)
	}
	if p.spec.Slots == 0 {
		return 0, false
	}
	if p.dirty {
		p.proj = p.proj[:0]
		for _, r := range p.runs {
			p.proj = append(p.proj, r.start+w.duration(r.task, i))
		}
		for len(p.proj) < p.spec.Slots {
			p.proj = append(p.proj, w.now)
		}
		heap.Init(&p.proj)
		for _, q := range p.queue[p.head:] {
			s := max(w.now, p.proj[0])
			p.proj[0] = s + w.duration(q, i)
			heap.Fix(&p.proj, 0)
		}
		p.dirty = false
	}
	return max(w.now, p.proj[0]), true
}

// simulateStart walks pool i's queue through its capacity windows: each queued task, then k,
// starts at the first moment a slot of the window then open is free.
func (w *world) simulateStart(k, i int) (float64, bool) {
	p := &w.pools[i]
	var busy []float64
	for _, r := range p.runs {
		busy = append(busy, r.start+w.duration(r.task, i))
	}
	t := w.now
	limit := w.now + 2*86400
	startOne := func(d float64) bool {
		for t < limit {
			n := 0
			next := math.Inf(1)
			for _, f := range busy {
				if f > t {
					n++
					next = min(next, f)
				}
			}
			if n < w.slotsAt(i, t) {
				busy = append(busy, t+d)
				return true
			}
			t = min(next, w.nextEdge(i, t))
		}
		return false
	}
	for _, q := range p.queue[p.head:] {
		if !startOne(w.duration(q, i)) {
			return 0, false
		}
	}
	if !startOne(w.duration(k, i)) {
		return 0, false
	}
	return t, true
}

// nextEdge is the next start or end of one of pool i's windows after t.
func (w *world) nextEdge(i int, t float64) float64 {
	next := math.Inf(1)
	day := math.Floor(t/86400) * 86400
	for _, win := range w.pools[i].spec.Window.Windows {
		for _, m := range []int{win.Start, win.End} {
			e := day + float64(m*60)
			if e <= t {
				e += 86400
			}
			next = min(next, e)
		}
	}
	return next
}

package placement

import (
	"math"
	"slices"
	"testing"
	"time"
)

// burstPools are four CPU pools, cheapest first, whose headroom (free slots + queue up to the
// hard watermark) is 4000, 3000, 2000 and 1000 tasks: 10 000 in all, the cheapest the largest.
func burstPools(tb testing.TB) []Pool {
	shape := func(p Pool, slots, queue int) Pool {
		p.Slots, p.Running, p.Ready, p.QueueCapacity = slots, 0, 0, queue
		return p
	}
	return []Pool{
		shape(cpuPool(tb, "aws", "us-east-1", "m6i.xlarge"), 200, 4000),            // 0.04800
		shape(cpuPool(tb, "gcp", "us-central1", "n2-standard-4"), 150, 3000),       // 0.04856
		shape(cpuPool(tb, "aws", "eu-west-1", "m6i.xlarge"), 100, 2000),            // 0.05350
		shape(cpuPool(tb, "azure", "southcentralus", "Standard_D4s_v5"), 50, 1000), // 0.05750
	}
}

func headroom(p Pool, hard float64) int {
	return max(0, int(math.Floor(float64(p.QueueCapacity)*hard+1e-9))-p.Ready) + max(0, p.Slots-p.Running)
}

func TestBurstFillsCheapestFirst(t *testing.T) {
	pools := burstPools(t)
	cfg := DefaultConfig()
	total := 0
	for _, p := range pools {
		total += headroom(p, cfg.HardWatermark)
	}
	if total != 10_000 {
		t.Fatalf("fixture headroom %d, want 10 000", total)
	}
	s := mustSnapshot(t, pools...)
	p := mustPlacer(t, cfg, nil)
	counts := make([]int, len(pools))
	for n := 1; n <= 10_000; n++ {
		d := p.Place(s, cpuTask(), t0)
		if !d.OK {
			t.Fatalf("placement %d failed: %v", n, d.Err())
		}
		// Cheapest first, each to its hard watermark: a dearer pool gets work only once every
		// cheaper one is full (no penalty below the watermark).
		for i := range d.Index {
			if full := headroom(pools[i], cfg.HardWatermark); counts[i] < full {
				t.Fatalf("placement %d went to pool %d while pool %d had %d of %d", n, d.Index, i, counts[i], full)
			}
		}
		counts[d.Index]++
		switch n {
		case 1000, 2500, 5000, 7500, 10_000:
			t.Logf("after %5d: %v", n, counts)
			for i := 1; i < len(counts); i++ {
				if counts[i] > counts[0] {
					t.Fatalf("after %d: pool %d got %d, more than the cheapest (%d)", n, i, counts[i], counts[0])
				}
			}
		}
	}
	for i, pool := range pools {
		want := float64(headroom(pool, cfg.HardWatermark)) / float64(total)
		if got := float64(counts[i]) / 10_000; math.Abs(got-want) > 0.01 {
			t.Errorf("%s: share %.3f, want %.3f ± 0.01", pool.Key(), got, want)
		}
	}
	d := p.Place(s, cpuTask(), t0)
	if d.OK || !d.AllSaturated() {
		t.Fatalf("after every pool's headroom: %+v %v, want all saturated", d, d.Err())
	}
	crit := cpuTask()
	crit.Critical = true
	if d := p.Place(s, crit, t0); !d.OK || d.Index != 0 {
		t.Fatalf("critical after saturation: %+v, want the cheapest pool", d)
	}
}

func TestBurstBelowTotalHeadroom(t *testing.T) {
	// Twice the room of the burst. There is no penalty below the hard watermark, so price alone
	// decides there: the cheapest takes the burst up to its hard watermark, the next the rest,
	// the dearer two nothing.
	pools := burstPools(t)
	for i := range pools {
		pools[i].Slots *= 2
		pools[i].QueueCapacity *= 2
	}
	cfg := DefaultConfig()
	s := mustSnapshot(t, pools...)
	p := mustPlacer(t, cfg, nil)
	counts := make([]int, len(pools))
	for range 10_000 {
		counts[p.Place(s, cpuTask(), t0).Index]++
	}
	full := headroom(pools[0], cfg.HardWatermark)
	if want := []int{full, 10_000 - full, 0, 0}; !slices.Equal(counts, want) {
		t.Fatalf("counts %v, want %v: the cheapest filled to its hard watermark, then the next", counts, want)
	}
}

func TestEqualPricesFillInOrder(t *testing.T) {
	// Two pools at the same price tie on every score: the first in snapshot order (region, then
	// name) fills to its hard watermark, then the other takes the rest, whatever their queue
	// capacities.
	a := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	b := cpuPool(t, "azure", "eastus", "Standard_D4s_v5") // the same 0.048 per vCPU-hour
	a.Slots, a.Running, a.QueueCapacity = 10, 10, 3000
	b.Slots, b.Running, b.QueueCapacity = 10, 10, 1000
	s := mustSnapshot(t, a, b)
	cfg := DefaultConfig()
	p := mustPlacer(t, cfg, nil)
	counts := make([]int, 2)
	for range 3500 { // short of both hard watermarks together (2850 + 950)
		counts[p.Place(s, cpuTask(), t0).Index]++
	}
	// b (eastus) sorts before a (us-east-1).
	if want := []int{3500 - headroom(b, cfg.HardWatermark), headroom(b, cfg.HardWatermark)}; !slices.Equal(counts, want) {
		t.Fatalf("counts %v, want %v", counts, want)
	}
}

// Four servers: a pool that has just become attractive to all of them at
// once is damped (each server takes a quarter of its headroom until its next
// figures); a pool in steady state is not (one server's burst fills it up to
// its hard watermark, where the region's admission holds).
func TestServersShareHeadroom(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Servers = 4
	for _, tc := range []struct {
		name    string
		before  func(p []Pool) []Pool // the previous snapshot's pools; nil: none
		quarter bool
	}{
		{"steady", func(p []Pool) []Pool { return p }, false},
		{"first snapshot", nil, false},
		{"region returns", func(p []Pool) []Pool {
			for i := range p {
				p[i].RegionHealthy = false
			}
			return p
		}, true},
		{"figures resume after a stale gap", func(p []Pool) []Pool {
			for i := range p {
				p[i].UpdatedAt = p[i].UpdatedAt.Add(-cfg.StaleAfter - time.Second)
			}
			return p
		}, true},
		{"new to the view", func(p []Pool) []Pool { return p[:0] }, true},
		{"price drops", func(p []Pool) []Pool {
			for i := range p {
				p[i].PricePerSlotHour *= 1.5
			}
			return p
		}, true},
		{"slots come back", func(p []Pool) []Pool {
			for i := range p {
				p[i].Slots = 0
			}
			return p
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pools := burstPools(t)
			p := mustPlacer(t, cfg, nil)
			if tc.before != nil {
				p.Explain(mustSnapshot(t, tc.before(burstPools(t))...), cpuTask(), t0)
			}
			s := mustSnapshot(t, pools...)
			counts := make([]int, len(pools))
			for {
				d := p.Place(s, cpuTask(), t0)
				if !d.OK {
					if !d.AllSaturated() {
						t.Fatalf("stopped with %v", d.Err())
					}
					break
				}
				counts[d.Index]++
			}
			for i, pool := range pools {
				want := headroom(pool, cfg.HardWatermark)
				if tc.quarter {
					want /= 4
				}
				if counts[i] != want {
					t.Errorf("%s: %d placements, want %d (quarter: %v)", pool.Key(), counts[i], want, tc.quarter)
				}
			}
			// The damping ends with the pools' next figures.
			if tc.quarter {
				next := burstPools(t)
				for i := range next {
					next[i].UpdatedAt = next[i].UpdatedAt.Add(time.Second)
					next[i].Ready = min(next[i].QueueCapacity, counts[i]*4)
				}
				if st := p.state(mustSnapshot(t, next...)); st.herd.has(0) {
					t.Fatal("still damped after the next figures")
				}
			}
		})
	}
}

func TestDampingResetsOnNewFigures(t *testing.T) {
	cheap := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	cheap.Slots, cheap.Running, cheap.Ready, cheap.QueueCapacity = 10, 10, 0, 10 // headroom 9
	dear := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")
	dear.QueueCapacity, dear.PricePerSlotHour = 1_000_000, 1 // dear enough to lose until saturation
	p := mustPlacer(t, DefaultConfig(), nil)
	place := func(s *Snapshot) string { return key(p.Place(s, cpuTask(), t0)) }

	s1 := mustSnapshot(t, cheap, dear)
	for range 20 {
		place(s1)
	}
	if got := p.Explain(s1, cpuTask(), t0).Candidates[0].Reason; got != ReasonSaturated {
		t.Fatalf("after 20 placements the cheap pool is %q, want SATURATED", got)
	}

	// The same figures again (a snapshot rebuilt for another pool's sake): the count carries over.
	other := cpuPool(t, "gcp", "us-central1", "n2-standard-16")
	other.PricePerSlotHour = 1
	s2 := mustSnapshot(t, other, dear, cheap)
	if got := place(s2); got != dear.Key() {
		t.Fatalf("same figures, new snapshot: placed in %s, want %s", got, dear.Key())
	}
	// Going back to an older snapshot must not reset either.
	if got := place(s1); got != dear.Key() {
		t.Fatalf("older snapshot: placed in %s", got)
	}

	// Newer figures for the cheap pool: its count restarts against them.
	fresh := cheap
	fresh.UpdatedAt = t0
	s3 := mustSnapshot(t, fresh, dear)
	if got := place(s3); got != cheap.Key() {
		t.Fatalf("after new figures: placed in %s, want %s", got, cheap.Key())
	}
	if n := p.state(s3).placed[0].Load(); n != 1 {
		t.Fatalf("cheap pool count %d after the reset and one placement, want 1", n)
	}
	// And an older snapshot now does not bring the old count back.
	if got := p.Explain(s1, cpuTask(), t0).Candidates[0]; got.Reason != "" || got.Fill <= 0 {
		t.Fatalf("back on the old snapshot the cheap pool is %+v", got)
	}
}

func TestViewFollowsStaleness(t *testing.T) {
	// One snapshot, time moving on: the cached filters must expire with the figures.
	pool := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	s := mustSnapshot(t, pool)
	p := mustPlacer(t, DefaultConfig(), nil)
	for _, st := range []struct {
		at time.Time
		ok bool
	}{
		{t0, true},
		{pool.UpdatedAt.Add(15 * time.Second), true},
		{pool.UpdatedAt.Add(15*time.Second + 1), false},
		{t0, true},
	} {
		if d := p.Place(s, cpuTask(), st.at); d.OK != st.ok {
			t.Fatalf("at %v: OK %v, want %v (%v)", st.at, d.OK, st.ok, d.Err())
		}
	}
}

// The count of registered servers a snapshot carries overrides
// Config.Servers: four servers each take a quarter of a damped pool's headroom.
func TestSnapshotServersOverrideConfig(t *testing.T) {
	pools := burstPools(t)
	cfg := DefaultConfig() // Servers 1
	s := mustSnapshot(t, pools...).WithServers(4)
	p := mustPlacer(t, cfg, nil)
	p.Explain(mustSnapshot(t), cpuTask(), t0) // the pools are new to the view: damped
	counts := make([]int, len(pools))
	for {
		d := p.Place(s, cpuTask(), t0)
		if !d.OK {
			break
		}
		counts[d.Index]++
	}
	for i, pool := range pools {
		if want := headroom(pool, cfg.HardWatermark) / 4; counts[i] != want {
			t.Errorf("%s: %d placements, want a quarter of the headroom, %d", pool.Key(), counts[i], want)
		}
	}
	if s.WithServers(0).Servers() != 0 {
		t.Fatal("WithServers(0) must fall back to the config")
	}
}

// A server that placed nothing into a pool for longer than StaleAfter (a
// standby in front of a burst) judges the pool's return by the gap between
// its figures and the ones published just before them (PrevUpdatedAt), not
// by the time since it last placed: figures that kept coming every second
// are no return, so its burst fills the pool to its hard watermark; figures
// that resumed after a gap longer than StaleAfter are, and the same burst is
// damped to a quarter.
func TestIdleServerJudgesTheGapBetweenFigures(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Servers = 4
	for _, tc := range []struct {
		name    string
		prevAge time.Duration // age of the figures published before the burst's
		quarter bool
	}{
		{"figures kept coming", time.Second, false},
		{"figures resumed after a stale gap", cfg.StaleAfter + time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlacer(t, cfg, nil)
			old := burstPools(t)[0]
			old.UpdatedAt = t0.Add(-20 * time.Second)
			if d := p.Place(mustSnapshot(t, old), cpuTask(), old.UpdatedAt); !d.OK {
				t.Fatalf("first placement: %v", d.Err())
			}
			pool := burstPools(t)[0]
			pool.UpdatedAt, pool.PrevUpdatedAt = t0, t0.Add(-tc.prevAge)
			s := mustSnapshot(t, pool)
			n := 0
			for p.Place(s, cpuTask(), t0).OK {
				n++
			}
			want := headroom(pool, cfg.HardWatermark)
			if tc.quarter {
				want /= 4
			}
			if n != want {
				t.Errorf("the burst placed %d, want %d", n, want)
			}
		})
	}
}

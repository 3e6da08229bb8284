package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// naiveReason is the filter of docs/architecture.md §5 written the obvious way, one pool at a time, without the
// snapshot's indexes; saturation is left out (it depends on the Placer's counts).
func naiveReason(p Pool, t Task, now time.Time, cfg Config) Reason {
	for k, v := range t.Tags {
		if pv, ok := p.Tags[k]; !ok || pv != v {
			return ReasonTagMismatch
		}
	}
	if len(t.Regions) > 0 {
		found := false
		for _, r := range t.Regions {
			found = found || r == p.Region
		}
		if !found {
			return ReasonRegionExcluded
		}
	}
	switch slots, in := p.Window.SlotsAt(now, p.Slots); {
	case !p.RegionHealthy:
		return ReasonUnhealthy
	case now.Sub(p.UpdatedAt) > cfg.StaleAfter:
		return ReasonStaleStatus
	case in && slots == 0:
		return ReasonNoCapacityWindow
	case slots == 0 && !p.ScaleFromZero:
		return ReasonNoSlots
	case p.Types != nil && !slices.Contains(p.Types, t.Type):
		return ReasonNoHandler
	}
	return ""
}

func randomPools(rng *rand.Rand, rows []priceRow, n int) []Pool {
	regions := []string{"us-east-1", "eu-west-1", "ap-northeast-1", "us-central1", "eastus"}
	pools := make([]Pool, n)
	for i := range pools {
		r := rows[rng.IntN(len(rows))]
		p := Pool{
			Region: regions[rng.IntN(len(regions))], Name: fmt.Sprintf("pool-%d", i),
			Tags:  map[string]string{"provider": r.provider},
			Slots: rng.IntN(5), Running: rng.IntN(5), Ready: rng.IntN(12), QueueCapacity: rng.IntN(12),
			// A few exact price ties on purpose: the tie-break must agree too.
			PricePerSlotHour: []float64{r.price, r.spot, 0.048}[rng.IntN(3)],
			UpdatedAt:        t0.Add(-time.Duration(rng.IntN(20)) * time.Second),
			RegionHealthy:    rng.IntN(10) > 0, ScaleFromZero: rng.IntN(4) == 0,
		}
		if r.accelerator != "" {
			p.Tags["gpu"] = r.accelerator
		}
		if rng.IntN(3) == 0 {
			p.Discount = 0.3
		}
		if rng.IntN(3) == 0 {
			p.Types = []string{} // the pool's workers serve a subset of the tasks' types
			for k := range 3 {
				if rng.IntN(2) == 0 {
					p.Types = append(p.Types, fmt.Sprintf("type-%d", k))
				}
			}
		}
		if rng.IntN(2) == 0 {
			p.DrainRate = float64(rng.IntN(40)) / 10
		}
		if rng.IntN(3) == 0 {
			p.MaxWait = time.Duration(rng.IntN(30)) * time.Second
		}
		if rng.IntN(4) == 0 {
			start := rng.IntN(minutesPerDay)
			p.Window = &CapacitySchedule{Windows: []Window{{Start: start, End: (start + 1 + rng.IntN(600)) % minutesPerDay, Slots: rng.IntN(3)}}}
			if p.Window.Windows[0].Start == p.Window.Windows[0].End {
				p.Window = nil
			}
		}
		pools[i] = p
	}
	return pools
}

func randomTask(rng *rand.Rand) Task {
	t := Task{Type: fmt.Sprintf("type-%d", rng.IntN(3)), Critical: rng.IntN(5) == 0}
	switch rng.IntN(4) {
	case 0:
		t.Tags = map[string]string{"provider": []string{"aws", "gcp", "azure", "ibm"}[rng.IntN(4)]}
	case 1:
		t.Tags = map[string]string{"gpu": []string{"A100", "L4"}[rng.IntN(2)]}
	}
	if rng.IntN(3) == 0 {
		t.Regions = []string{"eu-west-1", "us-central1", "nowhere"}[:1+rng.IntN(3)]
	}
	if rng.IntN(2) == 0 {
		t.Home = []string{"us-east-1", "eu-west-1", "nowhere"}[rng.IntN(3)]
	}
	if rng.IntN(3) == 0 {
		t.MaxWait = time.Duration(rng.IntN(20)) * time.Second
	}
	return t
}

// TestExplainMatchesPlace checks on random pools and tasks that Place (indexed, pruned) chooses
// what Explain (every pool) chooses, that Explain's reasons match a naive filter, and that the
// winner is the cheapest eligible candidate.
func TestExplainMatchesPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rows := prices(t)
	cfg := DefaultConfig()
	cfg.CrossRegionPenalty = 0.00002
	cfg.EstimateRefresh = 0 // so every score must use the Estimator's current values
	// Under -race (make test) a tenth of the walk: it is one goroutine, so the
	// detector has nothing to find and takes 80 s for all of it; make check
	// (no -race) walks all of it.
	iters := 300
	if raceEnabled {
		iters = 30
	}
	for iter := range iters {
		pools := randomPools(rng, rows, 1+rng.IntN(150))
		s, err := NewSnapshot(cfg, pools)
		if err != nil {
			t.Fatal(err)
		}
		est := mustEstimator(t, cfg)
		for range rng.IntN(200) {
			pool := pools[rng.IntN(len(pools))]
			est.Observe("", fmt.Sprintf("type-%d", rng.IntN(3)), pool.Key(), time.Duration(1+rng.IntN(7200))*time.Second)
		}
		pcfg := cfg
		if iter%4 == 3 {
			// Another penalty curve than the snapshot's: no early stop, same choices.
			pcfg.SoftWatermark, pcfg.PenaltyMax = 0.5, 6
		}
		p := mustPlacer(t, pcfg, est)
		for step := range 40 {
			if step == 20 {
				// New figures: pools reordered, one gone, some republished, estimates moving.
				rng.Shuffle(len(pools), func(i, j int) { pools[i], pools[j] = pools[j], pools[i] })
				if len(pools) > 1 {
					pools = pools[1:]
				}
				for i := range pools {
					if rng.IntN(2) == 0 {
						pools[i].UpdatedAt = pools[i].UpdatedAt.Add(time.Second)
					}
				}
				if s, err = NewSnapshot(cfg, pools); err != nil {
					t.Fatal(err)
				}
				if iter%2 == 0 {
					est.Observe("", "type-0", pools[0].Key(), time.Second)
				}
			}
			task := randomTask(rng)
			now := t0.Add(time.Duration(rng.IntN(3600)) * time.Second / 600)
			exp := p.Explain(s, task, now)
			d := p.Place(s, task, now)
			if d != exp.Decision {
				t.Fatalf("iter %d step %d: Place %+v, Explain %+v (task %+v)", iter, step, d, exp.Decision, task)
			}
			won := 0
			for i, c := range exp.Candidates {
				want := naiveReason(pools[i], task, now, pcfg)
				if c.Reason != want && !(want == "" && c.Reason == ReasonSaturated) {
					t.Fatalf("iter %d step %d: %s reason %q, naive %q", iter, step, pools[i].Key(), c.Reason, want)
				}
				if c.Won {
					won++
				}
				if c.Reason == "" || c.Reason == ReasonSaturated {
					d, src, n := naiveDuration(est, task.Type, pools, i, cfg.DefaultDuration)
					if src != c.DurationSource || n != c.Observations || (src == SourceLearnt) != c.DurationKnown ||
						(c.Duration-d).Abs() > time.Microsecond {
						t.Fatalf("iter %d step %d: %s duration %v (%s, %d runs), naive %v (%s, %d runs)",
							iter, step, pools[i].Key(), c.Duration, c.DurationSource, c.Observations, d, src, n)
					}
				}
				if c.Reason == "" {
					// The rule: the cheapest within its wait target, else the least wait.
					switch {
					case !d.OK:
						t.Fatalf("iter %d step %d: %s eligible, nothing chosen", iter, step, pools[i].Key())
					case !c.OverTarget && d.OverTarget:
						t.Fatalf("iter %d step %d: %s within target, winner past it", iter, step, pools[i].Key())
					case !c.OverTarget && c.Cost < d.Cost:
						t.Fatalf("iter %d step %d: %s costs %v < winner %v", iter, step, pools[i].Key(), c.Cost, d.Cost)
					case d.OverTarget && c.Wait < d.Wait:
						t.Fatalf("iter %d step %d: %s waits %v < least-wait winner %v", iter, step, pools[i].Key(), c.Wait, d.Wait)
					}
					if ahead, w := naiveWait(pools[i], now, c.Ahead, c.Duration); c.Ahead < ahead || (w-c.Wait).Abs() > time.Millisecond {
						t.Fatalf("iter %d step %d: %s %d ahead, wait %v; naive %d ahead at least, wait %v",
							iter, step, pools[i].Key(), c.Ahead, c.Wait, ahead, w)
					}
				}
				if c.Won && (c.Wait != d.Wait || c.OverTarget != d.OverTarget) {
					t.Fatalf("iter %d step %d: winner wait %v/%v, decision %v/%v", iter, step, c.Wait, c.OverTarget, d.Wait, d.OverTarget)
				}
			}
			if (won == 1) != d.OK || won > 1 {
				t.Fatalf("iter %d step %d: %d winners, OK %v", iter, step, won, d.OK)
			}
		}
	}
}

// naiveDuration is the expected duration of typ in pools[i] by the fallback order: the pool's
// own estimate, the count-weighted mean of the type's estimates in the other pools, the default.
func naiveDuration(est *Estimator, typ string, pools []Pool, i int, def time.Duration) (time.Duration, Source, int64) {
	if e, ok := est.Lookup("", typ, pools[i].Key()); ok {
		return e.Mean, SourceLearnt, e.Count
	}
	var sum float64
	var n int64
	for _, p := range pools {
		if e, ok := est.Lookup("", typ, p.Key()); ok {
			sum += float64(e.Count) * e.Mean.Seconds()
			n += e.Count
		}
	}
	if n == 0 {
		return def, SourceDefault, 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second)), SourceTypeOtherPools, n
}

// naiveWait returns how many tasks the published figures put ahead of a new one in p (the queue
// beyond its free slots; damping only adds to it), and the expected wait with ahead tasks ahead:
// ahead + 1 ÷ the measured drain rate, else the slots ÷ the expected duration; 0 with a free slot.
func naiveWait(p Pool, now time.Time, ahead int64, d time.Duration) (int64, time.Duration) {
	slots, _ := p.Window.SlotsAt(now, p.Slots)
	published := int64(p.Ready - max(0, slots-p.Running))
	if ahead < 0 {
		return published, 0
	}
	rate := p.DrainRate * float64(slots) / float64(max(p.Slots, 1))
	if p.Slots == 0 || slots == p.Slots {
		rate = p.DrainRate
	}
	if rate <= 0 {
		rate = float64(max(slots, 1)) / d.Seconds()
	}
	return published, time.Duration(float64(ahead+1) / rate * float64(time.Second))
}

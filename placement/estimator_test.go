package placement

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestEstimatorEWMA(t *testing.T) {
	cfg := DefaultConfig() // alpha 0.2
	e := mustEstimator(t, cfg)
	if d, ok := e.Estimate("", "etl", "us-east-1/cpu"); ok || d != 0 {
		t.Fatalf("empty estimator: %v, %v", d, ok)
	}
	steps := []struct {
		observe time.Duration
		want    time.Duration
	}{
		{10 * time.Second, 10 * time.Second}, // the first observation is the estimate
		{20 * time.Second, 12 * time.Second}, // 0.2 × 20 + 0.8 × 10
		{-time.Second, 12 * time.Second},     // ignored
		{2 * time.Second, 10 * time.Second},  // 0.2 × 2 + 0.8 × 12 = 10
	}
	for i, st := range steps {
		e.Observe("", "etl", "us-east-1/cpu", st.observe)
		got, ok := e.Estimate("", "etl", "us-east-1/cpu")
		if !ok || (got-st.want).Abs() > time.Microsecond {
			t.Fatalf("step %d: estimate %v, %v; want %v", i, got, ok, st.want)
		}
	}
	if _, ok := e.Estimate("", "etl", "eu-west-1/cpu"); ok {
		t.Fatal("estimates leak between pools")
	}
	if _, ok := e.Estimate("", "train", "us-east-1/cpu"); ok {
		t.Fatal("estimates leak between types")
	}
	e.Observe("", "tiny", "p", 0)
	if d, _ := e.Estimate("", "tiny", "p"); d != shortestObservation {
		t.Fatalf("a zero duration is kept as %v, want %v", d, shortestObservation)
	}
}

func TestEstimatorLRU(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EstimatorSize = 3
	e := mustEstimator(t, cfg)
	e.Observe("", "a", "p", time.Second)
	e.Observe("", "b", "p", 2*time.Second)
	e.Observe("", "c", "p", 3*time.Second)
	e.Estimate("", "a", "p") // reads do not refresh: "a" is still the least recently observed
	e.Observe("", "d", "p", 4*time.Second)
	e.Observe("", "b", "p", 2*time.Second) // refreshes "b"
	e.Observe("", "e", "p", 5*time.Second) // evicts "c"
	for typ, want := range map[string]bool{"a": false, "b": true, "c": false, "d": true, "e": true} {
		if _, ok := e.Estimate("", typ, "p"); ok != want {
			t.Errorf("%s kept = %v, want %v", typ, ok, want)
		}
	}
}

func TestPlacerRereadsEstimates(t *testing.T) {
	use1 := cpuPool(t, "aws", "us-east-1", "m6i.xlarge") // 0.048
	euw1 := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge") // 0.0535
	s := mustSnapshot(t, use1, euw1)
	for _, refresh := range []time.Duration{0, time.Second} {
		t.Run(fmt.Sprint("refresh=", refresh), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.EstimateRefresh = refresh
			e := mustEstimator(t, cfg)
			p := mustPlacer(t, cfg, e)
			if got := key(p.Place(s, cpuTask(), t0)); got != use1.Key() {
				t.Fatalf("no estimates: chose %s", got)
			}
			e.Observe("", "etl", use1.Key(), 2*time.Hour)
			e.Observe("", "etl", euw1.Key(), time.Hour)
			want := euw1.Key() // 0.0535 × 1 h < 0.048 × 2 h
			if refresh > 0 {
				want = use1.Key() // still on the estimates read a moment ago
			}
			if got := key(p.Place(s, cpuTask(), t0.Add(refresh/2))); got != want {
				t.Fatalf("within the refresh period: chose %s, want %s", got, want)
			}
			if got := key(p.Place(s, cpuTask(), t0.Add(refresh))); got != euw1.Key() {
				t.Fatalf("after the refresh period: chose %s, want %s", got, euw1.Key())
			}
		})
	}
}

func TestEstimatesCarriedAcrossSnapshots(t *testing.T) {
	use1 := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")       // 0.048
	euw1 := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")       // 0.0535
	apne1 := cpuPool(t, "aws", "ap-northeast-1", "m6i.xlarge") // 0.062
	cfg := DefaultConfig()
	cfg.EstimateRefresh, cfg.DefaultDuration = time.Minute, time.Hour
	e := mustEstimator(t, cfg)
	usc1 := cpuPool(t, "gcp", "us-central1", "n2-standard-4")                          // 0.04856
	usc1.PricePerSlotHour = priceOf(t, "gcp", "us-central1", "n2-standard-4").spot / 4 // 0.01388
	want := map[string]time.Duration{use1.Key(): 2 * time.Hour, euw1.Key(): time.Hour, apne1.Key(): 10 * time.Minute}
	for k, d := range want {
		e.Observe("", "etl", k, d)
	}
	p := mustPlacer(t, cfg, e)
	if got := key(p.Place(mustSnapshot(t, euw1, use1), cpuTask(), t0)); got != euw1.Key() {
		t.Fatalf("first snapshot: chose %s", got)
	}
	// A new snapshot carries the table over, though every index moved (usc1 sorts first); the
	// new pools' estimates are read (apne1, 0.0103 USD, wins) or taken from the other pools
	// (usc1, which has none).
	s2 := mustSnapshot(t, apne1, use1, usc1, euw1)
	exp := p.Explain(s2, cpuTask(), t0)
	if got := key(exp.Decision); got != apne1.Key() {
		t.Fatalf("second snapshot: chose %s, want %s", got, apne1.Key())
	}
	// usc1 has no estimate of its own: the type's in the other three pools, one run each.
	want[usc1.Key()] = (2*time.Hour + time.Hour + 10*time.Minute) / 3
	for _, c := range exp.Candidates {
		k := c.Region + "/" + c.Pool
		src, runs := SourceLearnt, int64(1)
		if k == usc1.Key() {
			src, runs = SourceTypeOtherPools, 3
		}
		if c.DurationKnown != (k != usc1.Key()) || c.DurationSource != src || c.Observations != runs ||
			(c.Duration-want[k]).Abs() > time.Millisecond {
			t.Errorf("%s: duration %v (%s, %d runs), want %v (%s, %d runs)", k, c.Duration, c.DurationSource,
				c.Observations, want[k], src, runs)
		}
	}
}

func TestEstimatorConcurrent(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EstimatorSize = 64
	e := mustEstimator(t, cfg)
	p := mustPlacer(t, cfg, e)
	pools := []Pool{cpuPool(t, "aws", "us-east-1", "m6i.xlarge"), cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")}
	for i := range pools {
		pools[i].QueueCapacity = 1_000_000
	}
	s := mustSnapshot(t, pools...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	placed := 0
	for g := range 4 {
		wg.Go(func() {
			n := 0
			for i := range 2000 {
				typ := fmt.Sprintf("t%d", i%10)
				e.Observe("", typ, pools[(g+i)%2].Key(), time.Duration(i%50+1)*time.Second)
				if d := p.Place(s, Task{Type: typ}, t0); d.OK {
					n++
				}
			}
			mu.Lock()
			placed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	st := p.state(s)
	if got := st.placed[0].Load() + st.placed[1].Load(); got != int64(placed) {
		t.Fatalf("counted %d placements, made %d", got, placed)
	}
}

func TestPlaceConcurrentSnapshots(t *testing.T) {
	// A Placer is shared by request goroutines while new snapshots arrive and completions are
	// observed: no races (run with -race), and every failed decision says why.
	cfg := DefaultConfig()
	cfg.EstimateRefresh = 0
	e := mustEstimator(t, cfg)
	p := mustPlacer(t, cfg, e)
	base := burstPools(t)
	snaps := make([]*Snapshot, 3)
	for j := range snaps {
		pools := slices.Clone(base)
		for i := range pools {
			pools[i].UpdatedAt = t0.Add(time.Duration(j) * time.Millisecond)
		}
		snaps[j] = mustSnapshot(t, pools[j:]...)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 3000 {
				s := snaps[(g+i/100)%len(snaps)]
				task := cpuTask()
				task.Critical = i%7 == 0
				if i%50 == 0 {
					exp := p.Explain(s, task, t0)
					if len(exp.Candidates) != s.Len() {
						t.Errorf("explain: %d candidates for %d pools", len(exp.Candidates), s.Len())
						return
					}
					continue
				}
				if d := p.Place(s, task, t0); d.OK {
					e.Observe("", task.Type, base[d.Index+len(base)-s.Len()].Key(), time.Duration(1+i%30)*time.Second)
				} else if d.Err() == nil {
					t.Errorf("failed decision without an error: %+v", d)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Published estimates: a pool's own first, then the type's in the other pools (weighted by
// their observations), then the default; Explain says which, and on how many runs.
func TestFallbackOrder(t *testing.T) {
	pool := func(region string, price float64) Pool {
		return Pool{Region: region, Name: "cpu", Tags: map[string]string{"class": "cpu"}, Slots: 10,
			QueueCapacity: 100, PricePerSlotHour: price, UpdatedAt: t0.Add(-time.Second), RegionHealthy: true}
	}
	slow, fast, third := pool("spot-1", 0.01), pool("ondemand-1", 0.03), pool("other-1", 0.02)
	s := mustSnapshot(t, slow, fast, third)
	cfg := DefaultConfig()
	cfg.EstimateRefresh = 0
	e := mustEstimator(t, cfg)
	p := mustPlacer(t, cfg, e)
	type want struct {
		d    time.Duration
		src  Source
		runs int64
	}
	check := func(step string, task Task, winner string, ws map[string]want) {
		t.Helper()
		exp := p.Explain(s, task, t0)
		if got := key(exp.Decision); got != winner {
			t.Errorf("%s: chose %s, want %s", step, got, winner)
		}
		for _, c := range exp.Candidates {
			k := c.Region + "/" + c.Pool
			w := ws[k]
			if (c.Duration-w.d).Abs() > time.Millisecond || c.DurationSource != w.src || c.Observations != w.runs ||
				c.DurationKnown != (w.src == SourceLearnt) {
				t.Errorf("%s: %s %v (%s, %d runs), want %v (%s, %d runs)", step, k, c.Duration, c.DurationSource,
					c.Observations, w.d, w.src, w.runs)
			}
		}
	}
	etl := cpuTask()
	check("nothing learnt", etl, slow.Key(), map[string]want{
		slow.Key(): {time.Second, SourceDefault, 0}, fast.Key(): {time.Second, SourceDefault, 0},
		third.Key(): {time.Second, SourceDefault, 0},
	})
	// The slow pool's runs take 4 min: the others are assumed as slow, so price still decides.
	e.Set("", "etl", slow.Key(), Estimate{Mean: 4 * time.Minute, Spread: 30 * time.Second, Count: 300})
	check("one pool learnt", etl, slow.Key(), map[string]want{
		slow.Key(): {4 * time.Minute, SourceLearnt, 300}, fast.Key(): {4 * time.Minute, SourceTypeOtherPools, 300},
		third.Key(): {4 * time.Minute, SourceTypeOtherPools, 300},
	})
	// The fast pool runs it in 1 min: 0.03 × 1 < 0.01 × 4, it wins; the third pool takes the
	// count-weighted mean (300 × 4 + 100 × 1) / 400 = 3.25 min.
	e.Set("", "etl", fast.Key(), Estimate{Mean: time.Minute, Count: 100})
	check("two pools learnt", etl, fast.Key(), map[string]want{
		slow.Key(): {4 * time.Minute, SourceLearnt, 300}, fast.Key(): {time.Minute, SourceLearnt, 100},
		third.Key(): {3*time.Minute + 15*time.Second, SourceTypeOtherPools, 400},
	})
	// Another type learns nothing from etl.
	check("another type", Task{Type: "resize", Tags: etl.Tags}, slow.Key(), map[string]want{
		slow.Key(): {time.Second, SourceDefault, 0}, fast.Key(): {time.Second, SourceDefault, 0},
		third.Key(): {time.Second, SourceDefault, 0},
	})
	// Another tenant's etl learns nothing from this tenant's runs: not the pools' own, not the
	// fallback from other pools; the default, and price decides as before anything ran.
	check("another tenant", Task{Type: "etl", Tenant: "globex", Tags: etl.Tags}, slow.Key(), map[string]want{
		slow.Key(): {time.Second, SourceDefault, 0}, fast.Key(): {time.Second, SourceDefault, 0},
		third.Key(): {time.Second, SourceDefault, 0},
	})
	// Its own runs are its own: globex's fast pool runs etl in 10 min (slower than the slow pool's
	// 4 min for the first tenant), so it places on the slow pool, the first tenant on the fast one.
	e.Set("globex", "etl", fast.Key(), Estimate{Mean: 10 * time.Minute, Count: 5})
	check("another tenant learnt", Task{Type: "etl", Tenant: "globex", Tags: etl.Tags}, slow.Key(), map[string]want{
		slow.Key(): {10 * time.Minute, SourceTypeOtherPools, 5}, fast.Key(): {10 * time.Minute, SourceLearnt, 5},
		third.Key(): {10 * time.Minute, SourceTypeOtherPools, 5},
	})
	check("the first tenant after", etl, fast.Key(), map[string]want{
		slow.Key(): {4 * time.Minute, SourceLearnt, 300}, fast.Key(): {time.Minute, SourceLearnt, 100},
		third.Key(): {3*time.Minute + 15*time.Second, SourceTypeOtherPools, 400},
	})
	if c := p.Explain(s, etl, t0).Candidates[0]; c.Spread != 30*time.Second {
		t.Errorf("spread of the slow pool: %v, want 30s", c.Spread)
	}
	// Setting the same estimate again changes nothing a Placer must reread.
	v := e.version.Load()
	e.Set("", "etl", fast.Key(), Estimate{Mean: time.Minute, Count: 100})
	if e.version.Load() != v {
		t.Error("an unchanged Set bumped the version")
	}
}

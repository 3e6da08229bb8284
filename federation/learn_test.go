package federation_test

import (
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
)

// runs completes n tasks of typ in a region's pool, each taking d, on a
// clock of its own over the region's Redis (the harness has no real
// workers); the region's leader learns from them and publishes.
func runs(r *regionEnv, t *testing.T, pool, typ string, n int, d time.Duration) {
	t.Helper()
	var mu sync.Mutex
	now := time.Now()
	ws, err := store.New(r.Redis.Client(), queue.Options{Region: r.Name,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := fedtest.Ctx(t)
	for range n {
		sp := &task.Spec{Type: typ}
		if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Submitter().Submit(ctx, queue.NewTask{Spec: sp, Pool: pool, Pinned: true}); err != nil {
			t.Fatal(err)
		}
		ts, err := ws.Claimer().Claim(ctx, queue.ClaimRequest{Pool: pool, Worker: "w", N: 1})
		if err != nil || len(ts) != 1 {
			t.Fatalf("claim: %v %v", ts, err)
		}
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
		if errs, err := ws.Claimer().Complete(ctx, queue.Completion{ID: ts[0].ID, Token: ts[0].LeaseToken}); err != nil || errs[0] != nil {
			t.Fatalf("complete: %v %v", errs, err)
		}
	}
}

func candidate(ex apiv1.Explanation, regionName, pool string) apiv1.Candidate {
	for _, c := range ex.Candidates {
		if c.Region == regionName && c.Pool == pool {
			return c
		}
	}
	return apiv1.Candidate{}
}

// The durations each region learns from its completions reach
// every server of every region through the published figures: Azure spot,
// the cheapest per hour, stops winning once it is known to run the type
// 12x slower than GCP spot; pools that never ran it take the type's
// estimate in the other pools.
func TestLearntDurationsReachEveryServer(t *testing.T) {
	f := newFed(t)
	sp := spec{"type": "etl.learn", "tags": x86}
	for _, srv := range fedtest.Regions {
		ex := f.Explain(srv, sp)
		if ex.Chosen == nil || ex.Chosen.Region != az || ex.Chosen.Pool != poolSpot || ex.Chosen.EstimateSource != "default" {
			t.Fatalf("before any run %s chooses %+v", srv, ex.Chosen)
		}
	}
	// 0.00528 × 60 s > 0.0177175 × 5 s.
	runs(f.R(az), t, poolSpot, "etl.learn", 20, time.Minute)
	runs(f.R(gcp), t, poolSpot, "etl.learn", 20, 5*time.Second)
	took := fedtest.Eventually(t, 10*time.Second, "every server places on GCP spot with learnt estimates", func() bool {
		for _, srv := range fedtest.Regions {
			ex := f.Explain(srv, sp)
			if ex.Chosen == nil || ex.Chosen.Region != gcp || ex.Chosen.Pool != poolSpot {
				return false
			}
		}
		return true
	})
	t.Logf("learnt by every server %v after the last completion", took.Round(time.Millisecond))
	for _, srv := range fedtest.Regions {
		ex := f.Explain(srv, sp)
		for _, c := range []struct {
			region, pool, source string
			seconds              float64
			runs                 int64
		}{
			{az, poolSpot, "learnt", 60, 20},
			{gcp, poolSpot, "learnt", 5, 20},
			{aws, poolSpot, "type_other_pools", 32.5, 40},
			{aws, poolCPU, "type_other_pools", 32.5, 40},
		} {
			got := candidate(ex, c.region, c.pool)
			if got.EstimateSource != c.source || math.Abs(got.ExpectedSeconds-c.seconds) > 1e-6 || got.Observations != c.runs {
				t.Errorf("%s sees %s/%s: %v s (%s, %d runs), want %v s (%s, %d runs)", srv, c.region, c.pool,
					got.ExpectedSeconds, got.EstimateSource, got.Observations, c.seconds, c.source, c.runs)
			}
		}
		if got := candidate(f.Explain(srv, spec{"type": "etl.other", "tags": x86}), az, poolSpot); got.EstimateSource != "default" {
			t.Errorf("%s: another type got %+v", srv, got)
		}
	}
}

// A live price override is what the tasks claimed from then on
// record, not the worker's configured price.
func TestPriceOverrideRecordedAtClaim(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	st := f.R(az).Store
	claimed := func() float64 {
		t.Helper()
		sp := &task.Spec{Type: "etl.price"}
		if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Submitter().Submit(ctx, queue.NewTask{Spec: sp, Pool: poolSpot, Pinned: true}); err != nil {
			t.Fatal(err)
		}
		ts, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: poolSpot, Worker: "w", N: 1, Price: fedtest.PriceOf(az, poolSpot)})
		if err != nil || len(ts) != 1 {
			t.Fatalf("claim: %v %v", ts, err)
		}
		return ts[0].PricePerHour
	}
	if p := claimed(); p != fedtest.PriceOf(az, poolSpot) {
		t.Fatalf("before the override: %v", p)
	}
	spike := 5 * fedtest.PriceOf(az, poolSpot)
	if _, err := f.EtcdCli.Put(ctx, "/ax/prices/"+az+"/"+poolSpot, `{"price_per_slot_hour": `+
		strconv.FormatFloat(spike, 'f', -1, 64)+`}`); err != nil {
		t.Fatal(err)
	}
	fedtest.Eventually(t, 5*time.Second, "claims record the 5x price", func() bool { return claimed() == spike })
	if _, err := f.EtcdCli.Delete(ctx, "/ax/prices/"+az+"/"+poolSpot); err != nil {
		t.Fatal(err)
	}
	fedtest.Eventually(t, 5*time.Second, "claims record the list price again", func() bool { return claimed() == fedtest.PriceOf(az, poolSpot) })
}

package region

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

// The leader publishes each pool's learnt run times with the region's
// figures, per tenant, at most RunTimeTypes of them: each tenant's most
// observed first, then each tenant's second, so that a tenant with more
// runs does not keep another's out.
func TestPublishesRunTimes(t *testing.T) {
	h := newHarness(t)
	a, _ := h.startCell("a", nil, func(c *Config) {
		c.RunTimeTypes = 3
		c.Pools = append(c.Pools, Pool{Name: "gpu", QueueCapacity: 10, PricePerSlotHour: 2})
	})
	waitFor(t, 10*time.Second, "a leads", a.Leading)
	// Workers run on a clock of their own (same Redis): each run takes
	// exactly what the test says.
	var mu sync.Mutex
	now := time.Now()
	ws, err := store.New(h.redis.Client(), queue.Options{Region: "eu-west",
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(pool, typ string, d time.Duration, tenant ...string) {
		t.Helper()
		sp := &task.Spec{Type: typ, Tenant: append(tenant, "")[0]}
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
	for range 3 {
		run("cpu", "resize", 250*time.Millisecond)
	}
	run("cpu", "encode", 100*time.Millisecond)
	run("cpu", "encode", 300*time.Millisecond)
	run("cpu", "rare", 10*time.Millisecond) // beyond the top 3
	run("cpu", "resize", 5*time.Second, "globex")
	run("gpu", "train", 90*time.Second)

	want := map[string][]RunTime{
		"cpu": {{Type: "resize", Tenant: "default", Count: 3, Seconds: 0.25},
			{Type: "encode", Tenant: "default", Count: 2, Seconds: 0.2, Spread: 0.1},
			{Type: "resize", Tenant: "globex", Count: 1, Seconds: 5}},
		"gpu": {{Type: "train", Tenant: "default", Count: 1, Seconds: 90}},
	}
	var got map[string][]RunTime
	waitFor(t, 5*time.Second, "run times published", func() bool {
		r, err := h.etcd.Client().Get(ctx, "/ax/regions/eu-west")
		if err != nil || len(r.Kvs) == 0 {
			return false
		}
		var f Figures
		if json.Unmarshal(r.Kvs[0].Value, &f) != nil {
			return false
		}
		got = map[string][]RunTime{}
		for _, p := range f.Pools {
			got[p.Name] = p.RunTimes
		}
		return cmp.Equal(want, got)
	})
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("published (-want +got):\n%s", d)
	}
}

// The leader keeps each pool's live price (override, else configured,
// after discount) in the store: a claim records it, not the worker's
// configured price, and an override reaches the next claim.
func TestLivePriceRecordedAtClaim(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	override := map[string]float64{}
	a, _ := h.startCell("a", nil, func(c *Config) {
		c.Pools = []Pool{{Name: "cpu", QueueCapacity: 100, PricePerSlotHour: 0.05, Discount: 0.5}}
		c.LivePrice = func(pool string) (float64, bool) {
			mu.Lock()
			defer mu.Unlock()
			p, ok := override[pool]
			return p, ok
		}
	})
	waitFor(t, 10*time.Second, "a leads", a.Leading)
	ctx := context.Background()
	recorded := func() float64 {
		t.Helper()
		sp := &task.Spec{Type: "t"}
		if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := h.store.Submitter().Submit(ctx, queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true}); err != nil {
			t.Fatal(err)
		}
		// The worker is configured with a stale price.
		ts, err := h.store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 1, Price: 0.001})
		if err != nil || len(ts) != 1 {
			t.Fatalf("claim: %v %v", ts, err)
		}
		got, err := h.store.Get(ctx, ts[0].ID)
		if err != nil || got.PricePerHour != ts[0].PricePerHour {
			t.Fatalf("record %v vs returned %v: %v", got.PricePerHour, ts[0].PricePerHour, err)
		}
		return got.PricePerHour
	}
	waitFor(t, 5*time.Second, "the configured price after discount", func() bool { return recorded() == 0.025 })
	mu.Lock()
	override["cpu"] = 0.25 // a 5x spike
	mu.Unlock()
	waitFor(t, 5*time.Second, "the override after discount", func() bool { return recorded() == 0.125 })
}

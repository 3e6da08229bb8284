package store_test

import (
	"testing"

	"github.com/ax-sched/ax/queue"
)

// A claim records the pool's live price when the leader set one (a price
// override), the worker's configured price otherwise; the task returned to
// the worker carries what the record holds.
func TestClaimRecordsLivePrice(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 2 })
	claim := func() (returned, stored float64) {
		t.Helper()
		e.submit("cpu")
		ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w1", N: 1, Price: 0.04})
		if err != nil || len(ts) != 1 {
			t.Fatalf("claim: %v %v", ts, err)
		}
		got, err := e.s.Get(e.ctx, ts[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return ts[0].PricePerHour, got.PricePerHour
	}
	for _, c := range []struct {
		name   string
		prices map[string]float64
		want   float64
	}{
		{"no live price: the worker's", nil, 0.04},
		{"a 5x override", map[string]float64{"cpu": 0.2, "gpu": 3}, 0.2},
		{"another pool's price only", map[string]float64{"gpu": 3}, 0.04},
		{"override back to list", map[string]float64{"cpu": 0.04}, 0.04},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.prices != nil {
				if err := e.s.SetPrices(e.ctx, leader, c.prices); err != nil {
					t.Fatal(err)
				}
			}
			// Both shards: each has its own copy.
			for range 4 {
				if ret, st := claim(); ret != c.want || st != c.want {
					t.Fatalf("recorded %v, returned %v; want %v", st, ret, c.want)
				}
			}
		})
	}
	if err := e.s.SetPrices(e.ctx, queue.Fence{Name: leader.Name, Token: leader.Token - 1}, map[string]float64{"cpu": 1}); err != queue.ErrFenced {
		t.Fatalf("old leader: %v, want ErrFenced", err)
	}
}

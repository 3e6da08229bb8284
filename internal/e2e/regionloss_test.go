package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// A region dies (every ax process of eu-west-1 SIGKILLed, its Redis kept):
// the survivor stops placing on it as soon as a hand-off gets no answer,
// hand-offs it never received are placed again at home, and no task runs
// twice. Tasks submitted to the survivor after the kill must all succeed
// there within the stale window; eu-west-1 was the cheapest before (a live
// price override), so every task went there while it lived.
func TestRegionLossStrandsNoSurvivorTask(t *testing.T) {
	fed := newFederation(t, fedOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := fed.global.Client().Put(ctx, "/ax/prices/eu-west-1/cpu", `{"price_per_slot_hour": 0.00001}`); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}}
	waitUntil(t, 20*time.Second, "the cheaper eu-west-1 chosen", func() bool {
		_, where := fed.submit("us-east-1", tokSubmitterA, spec)
		return where == "eu-west-1"
	})
	eu := fed.region("eu-west-1")
	for _, p := range append(append([]*proc(nil), eu.servers...), eu.workers...) {
		p.kill()
	}
	killed := time.Now()

	// 10 submits a second for 8 s at the survivor.
	type sub struct {
		id, where string
		at        time.Time
	}
	var (
		mu   sync.Mutex
		subs []sub
	)
	for i := 0; i < 80; i++ {
		id, where := fed.submit("us-east-1", tokSubmitterA, spec)
		mu.Lock()
		subs = append(subs, sub{id, where, time.Now()})
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	stale := 15 * time.Second // placement.stale_after's default
	placedThere := 0
	for _, s := range subs {
		if s.where == "eu-west-1" {
			placedThere++
		}
	}
	waitUntil(t, stale, "every task submitted after the kill SUCCESS in us-east-1", func() bool {
		for _, s := range subs {
			if tk, code := fed.getTask("us-east-1", tokSubmitterA, s.id); code != http.StatusOK || tk.State != task.Success {
				return false
			}
		}
		return true
	})
	// None of them reached eu-west-1's store (so none can run twice when it
	// returns), and each ran once at home.
	for _, s := range subs {
		if _, err := eu.store.Get(ctx, s.id); err == nil {
			t.Errorf("task %s (submitted %v after the kill) is in eu-west-1's store too", s.id, s.at.Sub(killed))
		}
		if n := countReason(fed.trail("us-east-1", tokSubmitterA, s.id), task.ReasonClaimed); n != 1 {
			t.Errorf("task %s claimed %d times", s.id, n)
		}
	}
	t.Logf("after the kill: %d of %d submits were first placed on the dead region (then placed again at home); all succeeded at home within %v",
		placedThere, len(subs), stale)
}

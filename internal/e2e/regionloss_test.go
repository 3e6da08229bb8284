package e2e

import (
	"context"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
)

// A region dies (every ax process of eu-west-1 SIGKILLed, its Redis kept):
// the survivor stops placing on it as soon as a hand-off gets no answer,
// hand-offs it never received are placed again at home, and no task runs
// twice. Tasks submitted to the survivor after the kill must all succeed
// there within the stale window; eu-west-1 was the cheapest before (a live
// price override), so every task went there while it lived.
func TestRegionLossStrandsNoSurvivorTask(t *testing.T) {
	t.Parallel()
	fed := newFederation(t, fedOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := euCheapest(t, ctx, fed)
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

// A region freezes (its servers SIGSTOPped: connections are accepted by the
// kernel, nothing answers) while tasks are being handed to it. Those
// hand-offs may have reached it, so the sender waits placement.handoff_horizon
// (2 s here), then places them again at home (HANDOFF_REVOKED). When the
// region thaws it serves the requests it had queued, holding each copy
// unrun until the sender's word, asks, and drops them: every task ran once,
// at home; the thawed region ran none.
func TestFrozenRegionMidHandOffRunsEachTaskOnce(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	fed := newFederation(t, fedOpts{extra: "placement:\n  handoff_horizon: 2s\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec := euCheapest(t, ctx, fed)
	eu := fed.region("eu-west-1")
	for _, p := range eu.servers {
		p.signal(syscall.SIGSTOP)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			for _, p := range eu.servers {
				p.signal(syscall.SIGCONT)
			}
		}
	}
	defer thaw()
	var ids []string
	placedThere := 0
	for range 20 {
		id, where := fed.submit("us-east-1", tokSubmitterA, spec)
		ids = append(ids, id)
		if where == "eu-west-1" {
			placedThere++
		}
		time.Sleep(100 * time.Millisecond)
	}
	if placedThere == 0 {
		t.Fatal("no submit was placed on the frozen region: the test exercised nothing")
	}
	took := waitUntil(t, time.Minute, "every task SUCCESS in us-east-1", func() bool {
		for _, id := range ids {
			if tk, code := fed.getTask("us-east-1", tokSubmitterA, id); code != http.StatusOK || tk.State != task.Success || tk.HeldBy != "us-east-1" {
				return false
			}
		}
		return true
	})
	revoked := 0
	for _, id := range ids {
		revoked += countReason(fed.trail("us-east-1", tokSubmitterA, id), task.ReasonHandOffRevoked)
	}
	if revoked == 0 {
		t.Fatalf("%d tasks were placed on the frozen region, none revoked past the horizon", placedThere)
	}
	thaw()
	// The thawed region may store the queued hand-offs (held); it asks and
	// drops them. Give its leader time to come back and ask.
	waitUntil(t, 30*time.Second, "the thawed region holds no copy", func() bool {
		held, err := eu.store.HandOffs().Held(ctx, time.Now().Add(time.Hour), 1000)
		if err != nil || len(held) > 0 {
			return false
		}
		for _, id := range ids {
			if _, err := eu.store.Get(ctx, id); err == nil {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if n := countReason(fed.trail("us-east-1", tokSubmitterA, id), task.ReasonClaimed); n != 1 {
			t.Errorf("task %s claimed %d times", id, n)
		}
	}
	t.Logf("%d of 20 submits were placed on the frozen region; %d revoked past the horizon; all 20 SUCCESS at home %v after the last submit",
		placedThere, revoked, took.Round(100*time.Millisecond))
}

// euCheapest makes eu-west-1's cpu pool the cheapest (a live price
// override) and returns a spec that us-east-1 then places there.
func euCheapest(t *testing.T, ctx context.Context, fed *federation) map[string]any {
	t.Helper()
	if _, err := fed.global.Client().Put(ctx, "/ax/prices/eu-west-1/cpu", `{"price_per_slot_hour": 0.00001}`); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}}
	waitUntil(t, 20*time.Second, "the cheaper eu-west-1 chosen", func() bool {
		_, where := fed.submit("us-east-1", tokSubmitterA, spec)
		return where == "eu-west-1"
	})
	return spec
}

package peer

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/region"
)

// A region whose figures went stale (its Redis paused) and are fresh again
// is called at once for what it holds (get, trail, actions, fan-outs),
// while placement's unhealthy_grace has yet to trust it: those calls were
// 503 for the whole grace (10 s by default) after the region recovered. A
// stale or suspected region is still not called.
func TestPeerCalledOnceFreshWithinTheGrace(t *testing.T) {
	e := testenv.StartEtcd(t)
	c := e.Client()
	pc := placement.DefaultConfig()
	pc.StaleAfter = time.Minute
	v := view.New(c, "/ax/", pc, time.Hour, nil)
	t.Cleanup(v.Close)
	n := New(Config{Region: "r0", Regions: []string{"r0", "r1"}, View: v})
	put := func(updated time.Time) {
		t.Helper()
		b, _ := json.Marshal(region.Figures{Region: "r1", API: "http://r1.example", Leader: "x", UpdatedAt: updated})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Put(ctx, "/ax/regions/r1", string(b)); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(what string, cond func(view.RegionInfo) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v.Refresh()
			if r, ok := v.Region("r1"); ok && cond(r) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not within 10 s: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// First seen stale: unhealthy at once, and not called.
	put(time.Now().Add(-2 * time.Minute))
	wait("r1 stale and unhealthy", func(r view.RegionInfo) bool { return r.Stale && !r.Healthy })
	if _, err := n.API("r1"); err == nil {
		t.Fatal("a stale region is called")
	}
	// Fresh again: placement waits out the grace (an hour here), calls don't.
	put(time.Now())
	wait("r1 fresh", func(r view.RegionInfo) bool { return !r.Stale })
	if r, _ := v.Region("r1"); r.Healthy {
		t.Fatal("healthy before the grace: the test exercises nothing")
	}
	if api, err := n.API("r1"); err != nil || api != "http://r1.example" {
		t.Fatalf("a region fresh again within the grace: %q %v, want it called", api, err)
	}
	// Suspected (a request to it went unanswered): not called.
	v.Suspect("r1", time.Now())
	if _, err := n.API("r1"); err == nil {
		t.Fatal("a suspected region is called")
	}
	if _, err := n.API("nowhere"); err == nil {
		t.Fatal("a region outside the federation is called")
	}
}

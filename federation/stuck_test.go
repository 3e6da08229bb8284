package federation

import (
	"fmt"
	"testing"
	"time"
)

// withStuckGrace sets how long a pool may hold READY tasks without workers.
func withStuckGrace(d time.Duration) fedOption { return func(c *fedConfig) { c.stuck = d } }

// READY tasks of a pool that lost all its workers are re-placed elsewhere
// after the grace period: none lost, none duplicated.
func TestPoolWithoutWorkersIsReplaced(t *testing.T) {
	f := newFed(t, withSlots(az, poolSpot, 0), withStuckGrace(time.Second))
	stop := f.worker(az, poolSpot, 4) // registers slots, never claims
	f.waitReady()
	eventually(t, 10*time.Second, "aws sees the Azure spot worker", func() bool {
		r, ok := f.r(aws).node().View().Region(az)
		if !ok {
			return false
		}
		for _, p := range r.Pools {
			if p.Name == poolSpot {
				return p.Slots == 4
			}
		}
		return false
	})
	ctx := testCtx(t)
	var ids []string
	for i := 0; i < 20; i++ {
		r := f.submitOK(aws, tokAcme, map[string]any{"type": fmt.Sprintf("etl-%d", i%3), "tags": map[string]string{"class": "spot"}})
		ids = append(ids, r.ID)
	}
	defer func() {
		if t.Failed() {
			for _, id := range ids {
				t.Logf("%s in %v", id, f.where(ctx, id))
			}
		}
	}()
	eventually(t, 10*time.Second, "all on Azure spot, the cheapest", func() bool {
		for _, id := range ids {
			if w := f.where(ctx, id); len(w) != 1 || w[0] != az {
				return false
			}
		}
		return true
	})
	stop() // the pool's only worker dies
	eventually(t, 30*time.Second, "re-placed on GCP spot, the next cheapest", func() bool {
		for _, id := range ids {
			if w := f.where(ctx, id); len(w) != 1 || w[0] != gcp {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		tk, err := f.r(gcp).store.Get(ctx, id)
		if err != nil || tk.Pool != poolSpot {
			t.Fatalf("task %s at GCP: %+v %v", id, tk, err)
		}
	}
}

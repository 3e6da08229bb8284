package federation_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
)

// READY tasks of a pool that lost all its workers are re-placed elsewhere
// after the grace period: none lost, none duplicated.
func TestPoolWithoutWorkersIsReplaced(t *testing.T) {
	testenv.Slow(t)
	f := newFed(t, fedtest.WithSlots(az, poolSpot, 0), fedtest.WithStuckGrace(time.Second))
	stop := f.Worker(az, poolSpot, 4) // registers slots, never claims
	f.WaitReady()
	fedtest.Eventually(t, 10*time.Second, "aws sees the Azure spot worker", func() bool {
		r, ok := f.R(aws).Node().View().Region(az)
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
	ctx := fedtest.Ctx(t)
	var ids []string
	for i := 0; i < 20; i++ {
		r := f.SubmitOK(aws, tokAcme, map[string]any{"type": fmt.Sprintf("etl-%d", i%3), "tags": map[string]string{"class": "spot"}})
		ids = append(ids, r.ID)
	}
	defer func() {
		if t.Failed() {
			for _, id := range ids {
				t.Logf("%s in %v", id, f.Where(ctx, id))
			}
		}
	}()
	fedtest.Eventually(t, 10*time.Second, "all on Azure spot, the cheapest", func() bool {
		for _, id := range ids {
			if w := f.Where(ctx, id); len(w) != 1 || w[0] != az {
				return false
			}
		}
		return true
	})
	stop() // the pool's only worker dies
	fedtest.Eventually(t, 30*time.Second, "re-placed on GCP spot, the next cheapest", func() bool {
		for _, id := range ids {
			if w := f.Where(ctx, id); len(w) != 1 || w[0] != gcp {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		tk, err := f.R(gcp).Store.Get(ctx, id)
		if err != nil || tk.Pool != poolSpot {
			t.Fatalf("task %s at GCP: %+v %v", id, tk, err)
		}
	}
}

package federation_test

import (
	"testing"

	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/task"
)

// A hand-off receiver admits a task against its pool's real fill, as a
// local submit is admitted: the sender placed on figures that may be
// seconds old. Past ⌊capacity × spill watermark⌋ READY the receiver refuses
// (422, definite), and the sender places the task again elsewhere — each
// task lands once.
func TestHandOffReceiverAdmitsAgainstRealFill(t *testing.T) {
	const capacity, limit, n = 10, 8, 20 // limit: ⌊10 × 0.8⌋
	f := newFed(t, fedtest.WithCapacity(az, poolSpot, capacity))
	ctx := fedtest.Ctx(t)
	// The sender's figures are stale: it put 20 tasks for az's spot pool in
	// its outbox at once.
	f.R(aws).Stop()
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, n, payloadN)
	f.R(aws).Start()
	waitSettled(t, ctx, f, ids)
	c, err := f.R(az).Store.Tasks().Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ReadyIn(poolSpot); got > limit || got == 0 {
		t.Fatalf("%s/%s holds %d READY, want 1..%d (its admission limit)", az, poolSpot, got, limit)
	}
	refused := 0
	for _, id := range ids {
		if w := f.Where(ctx, id); len(w) != 1 {
			t.Fatalf("task %s lives in %v: want exactly one place", id, w)
		}
		tr, err := f.R(aws).Store.Tasks().Trail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if fedtest.HasReason(tr, task.ReasonHandOffRefused) {
			refused++
		}
	}
	if refused < n-limit {
		t.Fatalf("%d tasks refused by the full pool, want at least %d", refused, n-limit)
	}
	if got := handOffs(f.R(aws), az, "refused"); got < n-limit {
		t.Fatalf("ax_handoffs_total{outcome=refused} = %d, want at least %d", got, n-limit)
	}
	t.Logf("%d READY in %s/%s, %d refused and placed again", c.ReadyIn(poolSpot), az, poolSpot, refused)
}

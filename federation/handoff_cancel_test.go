package federation_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/task"
)

// A cancel that arrives while a task's hand-off is in flight is not
// refused and not lost: the API answers "requested", the hand-off carries
// it to the receiver, and the task ends CANCELED there (never READY for a
// worker), found from the home region's API.
func TestCancelWhileHandOffInFlight(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	hold := make(chan struct{})
	var c handOffCounter
	c.install(t, f.R(az), func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		<-hold // the first answer is late: the cancel comes meanwhile
		next.ServeHTTP(w, req)
	})
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 3, payloadN)
	fedtest.Eventually(t, 10*time.Second, "the hand-off request is on its way", func() bool { return c.batch.Load()+c.single.Load() > 0 })
	var resp apiv1.CancelResponse
	f.Call(http.MethodPost, f.R(aws).URL()+"/v1/tasks/"+ids[0]+"/cancel", tokOperator, struct{}{}).Want(t, 200).JSON(t, &resp)
	if !resp.Requested || resp.State != task.Pending {
		t.Fatalf("cancel during the hand-off: %+v, want requested (PENDING)", resp)
	}
	close(hold)
	fedtest.Eventually(t, 30*time.Second, "every hand-off settled", func() bool { return f.OutboxEmpty(ctx) })
	checkHandedOffOnce(t, ctx, f, ids, aws, az)
	if got := handOffs(f.R(aws), az, "accepted"); got != len(ids) {
		t.Fatalf("ax_handoffs_total{outcome=accepted} = %d, want %d (the resend with the cancel counts once)", got, len(ids))
	}
	held, err := f.R(az).Store.Get(ctx, ids[0])
	if err != nil || held.State != task.Canceled {
		t.Fatalf("the canceled task in the receiver: %+v %v, want CANCELED", held, err)
	}
	tk, rep := f.GetTask(aws, tokAcme, ids[0])
	if rep.Status != 200 || tk.State != task.Canceled || tk.HeldBy != az {
		t.Fatalf("GET from home: %d %s held by %s", rep.Status, tk.State, tk.HeldBy)
	}
	for _, id := range ids[1:] {
		if tk, _ := f.R(az).Store.Get(ctx, id); tk.State != task.Ready {
			t.Fatalf("an uncancelled task in the receiver: %s", tk.State)
		}
	}
	for _, x := range f.Trail(az, tokAcme, ids[0]) {
		if !task.Legal(x.From, x.To, x.Reason) {
			t.Fatalf("illegal step %+v", x)
		}
	}
}

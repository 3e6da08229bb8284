package federation_test

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// A task handed from aws to az and later drained back from az to aws must
// be live in aws again (not "already there" because of aws's forwarding
// record, which would leave both regions pointing at each other and the
// task nowhere), and every region's API must find it.
func TestHandedBackTaskIsLiveAgain(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 3, payloadN)
	fedtest.Eventually(t, 30*time.Second, "hand-off to az", func() bool { return f.OutboxEmpty(ctx) })
	checkHandedOffOnce(t, ctx, f, ids, aws, az)

	var moves []queue.DrainMove
	for _, id := range ids {
		moves = append(moves, queue.DrainMove{ID: id, Region: aws, Pool: poolSpot})
	}
	n, err := f.R(az).Store.HandOffs().Drain(ctx, moves)
	if err != nil || n != len(ids) {
		t.Fatalf("drain in az: %d %v", n, err)
	}
	fedtest.Eventually(t, 30*time.Second, "hand-back to aws", func() bool { return f.OutboxEmpty(ctx) })
	for _, id := range ids {
		if w := f.Where(ctx, id); len(w) != 1 || w[0] != aws {
			t.Fatalf("task %s lives in %v, want exactly [%s]", id, w, aws)
		}
		back, err := f.R(az).Store.Get(ctx, id)
		if err != nil || back.State != task.HandedOff || back.HandedOffTo != aws {
			t.Fatalf("az record of %s: %+v %v", id, back, err)
		}
		for _, name := range fedtest.Regions {
			tk, rep := f.GetTask(name, tokAcme, id)
			if rep.Status != 200 || tk.State == task.HandedOff || tk.HeldBy != aws {
				t.Fatalf("GET %s from %s: %d %s held by %s", id, name, rep.Status, tk.State, tk.HeldBy)
			}
		}
		tr := f.Trail(aws, tokAcme, id)
		for _, x := range tr {
			if !task.Legal(x.From, x.To, x.Reason) {
				t.Fatalf("illegal step in %s's trail: %+v", id, x)
			}
		}
		if !fedtest.HasReason(tr, task.ReasonHandedOff) {
			t.Fatalf("trail of %s lost its first hand-off: %+v", id, tr)
		}
	}
}

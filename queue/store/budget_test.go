package store_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
	"github.com/ax-sched/ax/queue/submit"
	"github.com/ax-sched/ax/task"
)

// A tenant's budget ledger: a submit reserves the task's estimate
// atomically with the check against the ledger's cap (ErrBudget past it,
// nothing stored); an attempt books its actual cost and the task's end
// takes its estimate off; a task received with its sender's reservation
// reserves nothing here but takes it off as it ends; a lowered cap never
// goes under what the tenant's tasks hold.
func TestBudgetLedgerReservesAtAdmission(t *testing.T) {
	e := newEnv(t, oneShard)
	now := e.clock.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	hold := month.Format("2006-01") + " 0.060000000000"
	ledger := func(set bool, cap float64) maint.Ledger {
		t.Helper()
		l, err := e.s.BudgetLedger(e.ctx, leader, 0, "acme", month, set, cap)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %.9f, want %.9f", what, got, want)
		}
	}
	ids := task.NewIDGen()
	// submit stores a new task, or (received) a hand-off received from
	// another region, which carries its sender's reservation.
	submit := func(received bool) (string, error) {
		t.Helper()
		nt := queue.NewTask{Spec: e.spec(func(sp *task.Spec) { sp.Tenant = "acme" }), Pool: "cpu", Budget: hold}
		if received {
			nt.ID, nt.Returning = ids.New("us-east", 0, e.clock.Now()), true
		}
		res, err := e.s.Submit(e.ctx, nt)
		if err != nil {
			t.Fatal(err)
		}
		return res[0].ID, res[0].Err
	}
	if _, err := submit(false); !errors.Is(err, errBudget) {
		t.Fatalf("no ledger yet: %v, want ErrBudget", err)
	}
	if l := ledger(true, 0.10); !l.HasCap || l.Used != 0 || l.Cap != 0.10 {
		t.Fatalf("made: %+v", l)
	}
	first, err := submit(false)
	if err != nil {
		t.Fatal(err)
	}
	near("one reserved", ledger(false, 0).Used, 0.06)
	if id, err := submit(false); !errors.Is(err, errBudget) {
		t.Fatalf("0.12 of a cap of 0.10: %v, want ErrBudget", err)
	} else if _, gerr := e.s.Get(e.ctx, id); gerr == nil {
		t.Fatalf("refused task %s stored", id)
	}
	if l := ledger(false, 0); l.Refused != 1 {
		t.Errorf("refused %d, want 1", l.Refused)
	}
	// Half an hour at $0.04/slot-hour: $0.02 booked, the estimate released.
	ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w1", N: 1, Price: 0.04})
	if err != nil || len(ts) != 1 || ts[0].ID != first {
		t.Fatalf("claim: %v %v", ts, err)
	}
	e.clock.Advance(30 * time.Minute)
	e.complete(ts[0])
	near("ended: actual only", ledger(false, 0).Used, 0.02)
	// A hand-off received: its sender holds the estimate.
	recv, err := submit(true)
	if err != nil {
		t.Fatal(err)
	}
	near("received", ledger(false, 0).Used, 0.02)
	if _, err := e.s.Cancel(e.ctx, recv, task.ReasonCanceledByUser, "test"); err != nil {
		t.Fatal(err)
	}
	near("received and canceled", ledger(false, 0).Used, -0.04)
	if _, err := submit(false); err != nil {
		t.Fatalf("0.02 of 0.10 again: %v", err)
	}
	// A cap lowered under what is held stays at what is held.
	if l := ledger(true, 0); l.Cap != l.Used {
		t.Errorf("lowered cap %.9f, want the %.9f held", l.Cap, l.Used)
	}
	if _, err := e.s.BudgetLedger(e.ctx, queue.Fence{Name: leader.Name, Token: leader.Token - 1}, 0, "acme", month, true, 1); !errors.Is(err, queue.ErrFenced) {
		t.Errorf("old leader: %v, want ErrFenced", err)
	}
}

var errBudget = submit.ErrBudget

package federation_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/submit"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/schedule"
	"github.com/ax-sched/ax/task"
)

// Monthly budgets: each tenant runs one task, handed off from
// aws to the region of the cheapest spot pool (az), whose Redis records
// its cost; aws's server sums every region's records, so both tenants are
// past their (tiny) budgets there. acme's over_budget is refuse: 429
// budget_exceeded naming monthly_budget_usd. globex's is cap at
// $0.01/slot-hour: a task only on-demand pools ($0.048 and up) fit is 422
// unplaceable with OVER_PRICE_CAP in its explanation, one the az spot pool
// ($0.00528) fits is placed there. Before the spend was read, both were
// placed as usual.
func TestMonthlyBudgets(t *testing.T) {
	f := newFed(t,
		fedtest.WithBudget("acme", budget.Budget{MonthlyUSD: 1e-9, Refuse: true}),
		fedtest.WithBudget("globex", budget.Budget{MonthlyUSD: 1e-9, PriceCap: 0.01}))
	ctx := fedtest.Ctx(t)
	onDemand := spec{"type": "etl.step", "tags": map[string]string{"arch": "x86", "class": "on-demand"}}
	if sr := f.SubmitOK(aws, tokGlobex, onDemand); deref(sr.Pool) != poolCPU {
		t.Fatalf("before any spend: globex's on-demand task on %s/%s, want a cpu pool", sr.Region, deref(sr.Pool))
	}
	for _, tok := range []string{tokAcme, tokGlobex} {
		sr := f.SubmitOK(aws, tok, spec{"type": "etl.step", "tags": x86Spot})
		if sr.Region != az || deref(sr.Pool) != poolSpot {
			t.Fatalf("the spot task went to %s/%s, want a hand-off to %s/%s", sr.Region, deref(sr.Pool), az, poolSpot)
		}
		var held []*task.Task
		fedtest.Eventually(t, 10*time.Second, "the handed-off task is READY in az", func() bool {
			var err error
			held, err = f.R(az).Store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: poolSpot, Worker: "w", N: 1, Price: 1})
			return err == nil && len(held) == 1
		})
		time.Sleep(20 * time.Millisecond) // a run time of a few ms at $1/slot-hour
		if _, err := f.R(az).Store.Claimer().Complete(ctx, queue.Completion{ID: held[0].ID, Token: held[0].LeaseToken}); err != nil {
			t.Fatal(err)
		}
	}
	n := f.R(aws).Node()
	if err := n.RefreshBudgets(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if st, ok := n.BudgetOf(tenant); !ok || !st.Over || st.SpentUSD <= 0 {
			t.Fatalf("%s's budget on aws: %+v, %v; want the spend az recorded, past the budget", tenant, st, ok)
		}
	}
	// GET /v1/cost shows a tenant's token its own budget only.
	var rep apiv1.CostReport
	f.Call(http.MethodGet, f.R(aws).URL()+"/v1/cost", tokAcme, nil).Want(t, http.StatusOK).JSON(t, &rep)
	if len(rep.Budgets) != 1 || rep.Budgets[0].Tenant != "acme" || rep.Budgets[0].State != "over" ||
		rep.Budgets[0].OverBudget != "refuse" || rep.Budgets[0].SpentUSD <= 0 || rep.Budgets[0].UsedRatio < 1 {
		t.Fatalf("acme's cost report budgets: %+v, want acme's alone, over", rep.Budgets)
	}
	e := f.Submit(aws, tokAcme, onDemand).Want(t, http.StatusTooManyRequests).Err(t)
	if e.Code != apiv1.CodeBudgetExceeded || e.Field != "monthly_budget_usd" {
		t.Fatalf("acme past its budget: %+v, want budget_exceeded naming monthly_budget_usd", e)
	}
	var eb apiv1.ErrorBody
	f.Submit(aws, tokGlobex, onDemand).Want(t, http.StatusUnprocessableEntity).JSON(t, &eb)
	capped := 0
	if eb.Error.Explanation != nil {
		for _, c := range eb.Error.Explanation.Candidates {
			if c.Rejected == "OVER_PRICE_CAP" {
				capped++
			}
		}
	}
	if eb.Error.Code != apiv1.CodeUnplaceable || capped == 0 {
		t.Fatalf("globex past its budget, on-demand only: %+v, want 422 unplaceable with OVER_PRICE_CAP candidates", eb.Error)
	}
	if sr := f.SubmitOK(aws, tokGlobex, spec{"type": "etl.step", "tags": x86Spot}); sr.Region != az || deref(sr.Pool) != poolSpot {
		t.Fatalf("globex past its budget, spot: %s/%s, want %s/%s (under its price cap)", sr.Region, deref(sr.Pool), az, poolSpot)
	}

	budgetHooks(t, f)
}

// budgetHooks: the same budgets on the paths that reach the store without a
// submit — a schedule's slot (Node.Enqueue, the federation leader's call;
// home az, so through az's internal enqueue) and a DAG node's release
// (Node.SubmitFixed). acme's slot is refused as its budget's (the
// scheduler gives it up as budget_exceeded) and nothing is stored;
// globex's slot and node carry its cap. Once acme's budget is raised
// (SetBudgets, ax server's SIGHUP) and the spend read again, its next slot
// is stored.
func budgetHooks(t *testing.T, f *fed) {
	ctx := fedtest.Ctx(t)
	n := f.R(aws).Node()
	slotSpec := func(tenant string) *task.Spec {
		return &task.Spec{Type: "etl.step", Tenant: tenant, Tags: x86Spot}
	}
	at := time.Now().UTC().Truncate(time.Second)
	id := schedule.TaskID("acme", "acme-nightly", at, az)
	created, refused, err := n.Enqueue(ctx, az, id, slotSpec("acme"))
	var be interface{ BudgetExceeded() bool }
	if err != nil || created || !errors.As(refused, &be) || !be.BudgetExceeded() {
		t.Fatalf("acme's slot past its refuse budget: created %v, refused %v, err %v; want a budget refusal", created, refused, err)
	}
	if _, err := f.R(az).Store.Get(ctx, id); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("acme's refused slot in az: %v, want none", err)
	}
	id = schedule.TaskID("globex", "globex-nightly", at, az)
	if created, refused, err := n.Enqueue(ctx, az, id, slotSpec("globex")); err != nil || refused != nil || !created {
		t.Fatalf("globex's slot past its cap budget: created %v, refused %v, err %v", created, refused, err)
	}
	if tk, err := f.R(az).Store.Get(ctx, id); err != nil || tk.MaxPricePerSlotHour != 0.01 {
		t.Fatalf("globex's slot in az: %+v, %v; want its price cap 0.01 on it", tk, err)
	}
	node := slotSpec("globex")
	if err := node.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
		t.Fatal(err)
	}
	nodeID := task.NewIDGen().New(aws, 0, time.Now())
	if res, err := n.SubmitFixed(ctx, queue.NewTask{ID: nodeID, Spec: node}); err != nil || res[0].Err != nil {
		t.Fatalf("globex's DAG node: %v %+v", err, res)
	}
	if tk, err := f.R(aws).Store.Get(ctx, nodeID); err != nil || tk.MaxPricePerSlotHour != 0.01 {
		t.Fatalf("globex's DAG node: %+v, %v; want its price cap 0.01 on it", tk, err)
	}

	// A new DAG run's node or schedule of globex's that only pools above
	// its cap match is refused as its submit is (422 with the explanation);
	// one under the cap, one no pool matches anyway (placed when due, as
	// ever) and acme's (BudgetRoom's) are not.
	var pe *submit.PlacementError
	if err := n.BudgetFits(&task.Spec{Type: "etl.step", Tenant: "globex", Tags: map[string]string{"arch": "x86", "class": "on-demand"}}); !errors.As(err, &pe) || pe.Saturated {
		t.Fatalf("globex's on-demand node past its cap budget: %v, want unplaceable", err)
	}
	for _, sp := range []*task.Spec{slotSpec("globex"), slotSpec("acme"),
		{Type: "etl.step", Tenant: "globex", Tags: map[string]string{"arch": "sparc"}}} {
		if err := n.BudgetFits(sp); err != nil {
			t.Fatalf("%s's node %v: %v, want no refusal by the budget", sp.Tenant, sp.Tags, err)
		}
	}

	n.SetBudgets(map[string]budget.Budget{"acme": {MonthlyUSD: 1e6, Refuse: true},
		"globex": {MonthlyUSD: 1e-9, PriceCap: 0.01}})
	if err := n.RefreshBudgets(ctx); err != nil {
		t.Fatal(err)
	}
	if st, ok := n.BudgetOf("acme"); !ok || st.Over || st.SpentUSD <= 0 {
		t.Fatalf("acme's raised budget: %+v, %v", st, ok)
	}
	id = schedule.TaskID("acme", "acme-nightly", at.Add(time.Second), az)
	if created, refused, err := n.Enqueue(ctx, az, id, slotSpec("acme")); err != nil || refused != nil || !created {
		t.Fatalf("acme's next slot once its budget allows: created %v, refused %v, err %v", created, refused, err)
	}
	if err := n.BudgetRoom("acme"); err != nil {
		t.Fatalf("acme's DAG runs once its budget allows: %v", err)
	}
}

// A schedule's slot reserves its expected cost on its tenant's budget
// ledger, as a submit does: the regions share acme's refuse budget of
// $0.00003 (about 20 slots' estimates) in the etcd; slots enqueued into az, from aws (az's
// internal enqueue) and in az itself, are stored while az's share has
// room, then refused as budget_exceeded with nothing stored, though
// nothing was spent; the slots stored never reserve past the budget.
func TestScheduleSlotsReserveBudget(t *testing.T) {
	const usd = 3e-5
	f := newFed(t, fedtest.WithBudget("acme", budget.Budget{MonthlyUSD: usd, Refuse: true}), fedtest.WithBudgetShares())
	ctx := fedtest.Ctx(t)
	slot := func() *task.Spec { return &task.Spec{Type: "etl.step", Tenant: "acme", Tags: x86Spot} }
	ex, err := f.R(az).Node().Explain(slot())
	if err != nil || !ex.Decision.OK || ex.Decision.Expected <= 0 {
		t.Fatalf("a slot's placement in az: %+v %v, want one with an expected cost", ex.Decision, err)
	}
	each := ex.Decision.Expected
	at := time.Now().UTC().Truncate(time.Second)
	stored, i := 0, 0
	enqueue := func(from string) (bool, error) {
		i++
		id := schedule.TaskID("acme", "acme-hourly", at.Add(time.Duration(i)*time.Second), az)
		created, refused, err := f.R(from).Node().Enqueue(ctx, az, id, slot())
		if err != nil {
			t.Fatalf("slot %d from %s: %v", i, from, err)
		}
		if created {
			stored++
		}
		return created, refused
	}
	// The first slot waits for az's leader to take its share.
	fedtest.Eventually(t, 20*time.Second, "a first slot of acme stored in az", func() bool {
		ok, _ := enqueue(az)
		return ok
	})
	var refused error
	for n := 0; n < 100 && refused == nil; n++ {
		_, refused = enqueue([]string{aws, az}[n%2])
	}
	var be interface{ BudgetExceeded() bool }
	if !errors.As(refused, &be) || !be.BudgetExceeded() {
		t.Fatalf("after %d slots stored: refused %v, want a budget refusal", stored, refused)
	}
	if float64(stored)*each > usd*1.0001 {
		t.Errorf("%d slots of %g USD each stored under a budget of %g USD", stored, each, usd)
	}
	if st, _ := f.R(aws).Node().BudgetOf("acme"); st.SpentUSD != 0 {
		t.Errorf("acme spent %v, want nothing (the slots only reserved)", st.SpentUSD)
	}
	t.Logf("%d slots stored, then refused: %v", stored, refused)
}

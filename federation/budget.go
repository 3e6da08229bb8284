package federation

// Monthly budgets per tenant (docs/cost.md "Budgets"). Each
// server reads the federation's spend of the tenants it has a budget for —
// the cost report of this UTC month grouped by tenant, every region's cost
// records (each region counts the attempts it ran in its own Redis) — every
// Config.BudgetRefresh, so the spend it judges by is at most that old plus the
// attempts still running (an attempt is recorded when it ends). At 80 % of
// its budget a tenant's ax_tenant_budget_used_ratio says so and one log
// line warns (once per server and month); past 100 % its new tasks are
// placed only on pools at or under its price cap ("cap": the submit is 422
// with the explanation when none fits), or refused ("refuse": 429
// budget_exceeded naming monthly_budget_usd).

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Budget is one tenant's monthly budget.
type Budget struct {
	MonthlyUSD float64
	// Refuse: past the budget new tasks are refused; else they are capped
	// at PriceCap per slot-hour.
	Refuse   bool
	PriceCap float64
}

// budgetWarn is the used ratio at which a tenant is warned.
const budgetWarn = 0.8

// BudgetError is a submit refused because its tenant spent its monthly
// budget (429 budget_exceeded).
type BudgetError struct {
	Tenant        string
	Spent, Budget float64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("tenant %s has spent $%s this month (UTC), past its monthly_budget_usd $%s: new tasks are refused until the month ends",
		e.Tenant, strconv.FormatFloat(e.Spent, 'g', 6, 64), strconv.FormatFloat(e.Budget, 'g', 6, 64))
}

// BudgetExceeded marks the error as a budget's refusal for the packages
// that do not import this one (schedule.Enqueuer).
func (e *BudgetError) BudgetExceeded() bool { return true }

// budgets is a server's view of its tenants' budgets and spend this month.
type budgets struct {
	mu     sync.Mutex
	set    map[string]Budget  // Config.Budgets, replaced by SetBudgets (SIGHUP)
	month  string             // YYYY-MM of spend
	spend  map[string]float64 // tenant → USD this month
	warned map[string]string  // tenant → the month it was warned in
}

// BudgetStatus is a tenant's budget as a server judges it.
type BudgetStatus struct {
	Budget
	SpentUSD float64
	Used     float64 // SpentUSD ÷ MonthlyUSD
	Over     bool    // Used ≥ 1
}

// BudgetOf returns tenant's budget status; false when it has no budget.
func (n *Node) BudgetOf(tenant string) (BudgetStatus, bool) {
	n.budgets.mu.Lock()
	b, ok := n.budgets.set[tenant]
	if !ok || b.MonthlyUSD <= 0 {
		n.budgets.mu.Unlock()
		return BudgetStatus{}, false
	}
	spent := 0.0
	if n.budgets.month == n.cfg.Now().UTC().Format("2006-01") {
		spent = n.budgets.spend[tenant]
	}
	n.budgets.mu.Unlock()
	used := spent / b.MonthlyUSD
	return BudgetStatus{Budget: b, SpentUSD: spent, Used: used, Over: used >= 1}, true
}

// Budgets are the budgets of tenant ("" every tenant) as this server
// judges them, by tenant name.
func (n *Node) Budgets(tenant string) []apiv1.CostBudget {
	var out []apiv1.CostBudget
	for _, t := range slices.Sorted(maps.Keys(n.budgetSet())) {
		st, ok := n.BudgetOf(t)
		if !ok || tenant != "" && t != tenant {
			continue
		}
		b := apiv1.CostBudget{Tenant: t, MonthlyBudgetUSD: st.MonthlyUSD, SpentUSD: st.SpentUSD, UsedRatio: st.Used,
			OverBudget: "cap", PriceCap: st.PriceCap, State: "ok"}
		if st.Refuse {
			b.OverBudget, b.PriceCap = "refuse", 0
		}
		switch {
		case st.Over:
			b.State = "over"
		case st.Used >= budgetWarn:
			b.State = "warn"
		}
		out = append(out, b)
	}
	return out
}

// applyBudget refuses sp (a *BudgetError) or tightens its price cap when
// its tenant is past its budget.
func (n *Node) applyBudget(sp *task.Spec) error {
	st, ok := n.BudgetOf(sp.Tenant)
	if !ok || !st.Over {
		return nil
	}
	if st.Refuse {
		n.metrics.rejected.WithLabelValues(n.cfg.Region, "budget").Inc()
		return &BudgetError{Tenant: sp.Tenant, Spent: st.SpentUSD, Budget: st.MonthlyUSD}
	}
	n.capBudget(sp)
	return nil
}

// capBudget tightens sp's price cap when its tenant is past a cap budget
// (a refuse budget is not applied here).
func (n *Node) capBudget(sp *task.Spec) {
	if st, ok := n.BudgetOf(sp.Tenant); ok && st.Over && !st.Refuse &&
		(sp.MaxPricePerSlotHour <= 0 || st.PriceCap < sp.MaxPricePerSlotHour) {
		sp.MaxPricePerSlotHour = st.PriceCap
	}
}

// BudgetRoom refuses a new source of tasks of tenant (a DAG run, a
// schedule) with a *BudgetError when it is past a refuse budget.
func (n *Node) BudgetRoom(tenant string) error {
	if st, ok := n.BudgetOf(tenant); ok && st.Over && st.Refuse {
		n.metrics.rejected.WithLabelValues(n.cfg.Region, "budget").Inc()
		return &BudgetError{Tenant: tenant, Spent: st.SpentUSD, Budget: st.MonthlyUSD}
	}
	return nil
}

// budgetSet is the budgets in force (read-only).
func (n *Node) budgetSet() map[string]Budget {
	n.budgets.mu.Lock()
	defer n.budgets.mu.Unlock()
	return n.budgets.set
}

// SetBudgets puts budgets in force in place of Config.Budgets (ax server's
// SIGHUP): a tenant's raised budget lets its submits, DAG runs and
// schedule slots through again from the next spend read (BudgetLoop reads
// it within Config.BudgetRefresh); a tenant no longer listed is no longer
// judged, and its gauge is removed.
func (n *Node) SetBudgets(budgets map[string]Budget) {
	n.budgets.mu.Lock()
	old := n.budgets.set
	n.budgets.set = maps.Clone(budgets)
	n.budgets.mu.Unlock()
	for t := range old {
		if b, ok := budgets[t]; !ok || b.MonthlyUSD <= 0 {
			n.metrics.budgetUsed.DeleteLabelValues(t)
		}
	}
	n.log.Info("budgets set", "tenants", len(budgets))
}

// BudgetFits refuses sp, a task of a new DAG run or schedule, when its
// tenant is past a cap budget and that cap is why no pool matches it: the
// *PlacementError (422 unplaceable, with the explanation) a submit of it
// gets. A task no pool matches even uncapped, or one whose pools under the
// cap are full, is not the budget's to refuse: it waits to be placed when
// due, as any task of an admitted DAG or schedule does.
func (n *Node) BudgetFits(sp *task.Spec) error {
	st, ok := n.BudgetOf(sp.Tenant)
	if !ok || !st.Over || st.Refuse {
		return nil
	}
	c := *sp
	c.RunAt, c.Delay = nil, 0
	if err := c.Normalize(n.cfg.Defaults, n.cfg.Now()); err != nil {
		return nil // refused elsewhere, naming its field
	}
	n.capBudget(&c)
	now, snap := n.cfg.Now(), n.view.Pools()
	if d := n.placer.Explain(snap, n.placeTask(&c, now), now).Decision; !d.OK && !d.AllSaturated() {
		return nil
	}
	if ex := n.explain(snap, &c, now); !ex.Decision.OK && !ex.Decision.AllSaturated() {
		return &PlacementError{Explanation: ex}
	}
	return nil
}

// BudgetLoop rereads the spend of the tenants with a budget every
// Config.BudgetRefresh until ctx ends; while there is none (SetBudgets may
// add some) it reads nothing. Every server runs it (submits are judged on
// every server).
func (n *Node) BudgetLoop(ctx context.Context) {
	refresh := func() bool {
		if len(n.budgetSet()) == 0 {
			return true
		}
		if err := n.RefreshBudgets(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("budgets: spend not read; judging by the last read", "err", err)
		}
		return true
	}
	refresh()
	every(ctx, n.cfg.BudgetRefresh, refresh)
}

// RefreshBudgets reads this month's spend per tenant from every region and
// updates the budget gauges. A region that does not answer leaves its
// spend out (logged): a budget is judged on what could be read.
func (n *Node) RefreshBudgets(ctx context.Context) error {
	now := n.cfg.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep, err := n.Cost(ctx, CostQuery{From: from, To: to, GroupBy: []string{apiv1.CostGroupTenant}}, 0)
	if err != nil {
		return err
	}
	if len(rep.Unavailable) > 0 {
		n.log.Warn("budgets: regions did not answer; their spend is left out", "regions", rep.Unavailable)
	}
	spend := map[string]float64{}
	for _, r := range rep.Rows {
		spend[r.Tenant] += r.SpendUSD
	}
	month := now.Format("2006-01")
	n.budgets.mu.Lock()
	set := n.budgets.set
	n.budgets.month, n.budgets.spend = month, spend
	if n.budgets.warned == nil {
		n.budgets.warned = map[string]string{}
	}
	var warn []string
	for t, b := range set {
		if b.MonthlyUSD > 0 && spend[t]/b.MonthlyUSD >= budgetWarn && n.budgets.warned[t] != month {
			n.budgets.warned[t] = month
			warn = append(warn, t)
		}
	}
	n.budgets.mu.Unlock()
	for t, b := range set {
		if b.MonthlyUSD > 0 {
			n.metrics.budgetUsed.WithLabelValues(t).Set(spend[t] / b.MonthlyUSD)
		}
	}
	for _, t := range warn {
		b := set[t]
		action := "refused"
		if !b.Refuse {
			action = "capped at $" + strconv.FormatFloat(b.PriceCap, 'g', 6, 64) + "/slot-hour"
		}
		n.log.Warn("tenant past 80 % of its monthly budget; past 100 % its new tasks are "+action,
			"tenant", t, "spent_usd", spend[t], "monthly_budget_usd", b.MonthlyUSD, "month", month)
	}
	return nil
}

package budget

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/task"
)

// Config of a server's budgets.
type Config struct {
	Region  string            // this server's region (metrics)
	Budgets map[string]Budget // by tenant; nil: none
	Refresh time.Duration     // how often Loop rereads the spend
	// ShareInterval is how often the region's leader rebalances its
	// shares of refuse budgets (SharesLoop; ShareIntervalDefault).
	ShareInterval time.Duration
	// Regions is every region of the federation; Ledgers this region's
	// budget ledgers, Shares the global etcd's shares documents under
	// SharesPrefix (nil Ledgers or Shares: no reservations are made
	// beyond what the store checks, and SharesLoop does nothing).
	Regions      []string
	Ledgers      Ledgers
	Shares       Shares
	SharesPrefix string
	Metrics      *metrics.Metrics
	Logger       *slog.Logger
	Now          func() time.Time
}

// Spend reads what tenants spent across the federation.
type Spend interface {
	// TenantSpend is each tenant's spend in USD over the UTC days from..to
	// (inclusive) in every region that answered, and the regions that did
	// not.
	TenantSpend(ctx context.Context, from, to time.Time) (spend map[string]float64, unavailable []string, err error)
}

// Book is a server's view of its tenants' budgets and spend this month,
// and the judge of their submits by it.
//
// It reads the federation's spend of the tenants it has a budget for —
// the cost report of this UTC month grouped by tenant, every region's cost
// records (each region counts the attempts it ran in its own Redis) — every
// Config.Refresh, so the spend it judges by is at most that old plus the
// attempts still running (an attempt is recorded when it ends). At 80 % of
// its budget a tenant's ax_tenant_budget_used_ratio says so and one log
// line warns (once per server and month); past 100 % its new tasks are
// placed only on pools at or under its price cap ("cap": the submit is 422
// with the explanation when none fits), or refused ("refuse": 429
// budget_exceeded naming monthly_budget_usd).
type Book struct {
	cfg   Config
	spend Spend

	mu     sync.Mutex
	set    map[string]Budget  // Config.Budgets, replaced by Set (SIGHUP)
	month  string             // YYYY-MM of spent
	spent  map[string]float64 // tenant → USD this month
	warned map[string]string  // tenant → the month it was warned in
}

// New is the book of cfg's budgets; spend reads the spend (Refresh).
func New(cfg Config, spend Spend) *Book {
	cfg.ShareInterval = cmp.Or(max(cfg.ShareInterval, 0), ShareIntervalDefault)
	return &Book{cfg: cfg, spend: spend, set: maps.Clone(cfg.Budgets)}
}

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
	// RetryAfter is when the refusal may change: the next spend read
	// (Config.Refresh), which sees a raised budget.
	RetryAfter time.Duration
	// Reserved: the spend read is under the budget, but what the tenant's
	// running and queued tasks are expected to cost leaves no room for
	// this one's estimate in its region's share.
	Reserved bool
}

func (e *BudgetError) Error() string {
	if e.Reserved {
		return fmt.Sprintf("tenant %s's monthly_budget_usd $%s is taken by its spend and the expected cost of its unfinished tasks (this region's share): retry once some finish",
			e.Tenant, strconv.FormatFloat(e.Budget, 'g', 6, 64))
	}
	return fmt.Sprintf("tenant %s has spent $%s this month (UTC), past its monthly_budget_usd $%s: new tasks are refused until the month ends",
		e.Tenant, strconv.FormatFloat(e.Spent, 'g', 6, 64), strconv.FormatFloat(e.Budget, 'g', 6, 64))
}

// BudgetExceeded marks the error as a budget's refusal for the packages
// that do not import this one (schedule.Enqueuer).
func (e *BudgetError) BudgetExceeded() bool { return true }

// BudgetStatus is a tenant's budget as a server judges it.
type BudgetStatus struct {
	Budget
	SpentUSD float64
	Used     float64 // SpentUSD ÷ MonthlyUSD
	Over     bool    // Used ≥ 1
}

// Of returns tenant's budget status; false when it has no budget.
func (bk *Book) Of(tenant string) (BudgetStatus, bool) {
	bk.mu.Lock()
	b, ok := bk.set[tenant]
	if !ok || b.MonthlyUSD <= 0 {
		bk.mu.Unlock()
		return BudgetStatus{}, false
	}
	spent := 0.0
	if bk.month == bk.cfg.Now().UTC().Format("2006-01") {
		spent = bk.spent[tenant]
	}
	bk.mu.Unlock()
	used := spent / b.MonthlyUSD
	return BudgetStatus{Budget: b, SpentUSD: spent, Used: used, Over: used >= 1}, true
}

// List is the budgets of tenant ("" every tenant) as this server
// judges them, by tenant name.
func (bk *Book) List(tenant string) []apiv1.CostBudget {
	var out []apiv1.CostBudget
	for _, t := range slices.Sorted(maps.Keys(bk.budgetSet())) {
		st, ok := bk.Of(t)
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

// Apply refuses sp (a *BudgetError) or tightens its price cap when
// its tenant is past its budget.
func (bk *Book) Apply(sp *task.Spec) error {
	st, ok := bk.Of(sp.Tenant)
	if !ok || !st.Over {
		return nil
	}
	if st.Refuse {
		bk.cfg.Metrics.Rejected.WithLabelValues(bk.cfg.Region, "budget").Inc()
		return &BudgetError{Tenant: sp.Tenant, Spent: st.SpentUSD, Budget: st.MonthlyUSD, RetryAfter: bk.cfg.Refresh}
	}
	bk.Cap(sp)
	return nil
}

// Cap tightens sp's price cap when its tenant is past a cap budget
// (a refuse budget is not applied here).
func (bk *Book) Cap(sp *task.Spec) {
	if st, ok := bk.Of(sp.Tenant); ok && st.Over && !st.Refuse &&
		(sp.MaxPricePerSlotHour <= 0 || st.PriceCap < sp.MaxPricePerSlotHour) {
		sp.MaxPricePerSlotHour = st.PriceCap
	}
}

// Room refuses a new source of tasks of tenant (a DAG run, a
// schedule) with a *BudgetError when it is past a refuse budget.
func (bk *Book) Room(tenant string) error {
	if st, ok := bk.Of(tenant); ok && st.Over && st.Refuse {
		bk.cfg.Metrics.Rejected.WithLabelValues(bk.cfg.Region, "budget").Inc()
		return &BudgetError{Tenant: tenant, Spent: st.SpentUSD, Budget: st.MonthlyUSD, RetryAfter: bk.cfg.Refresh}
	}
	return nil
}

// Hold is the reservation a new task of tenant with an estimated cost of
// usd makes on its budget ledger (queue.NewTask.Budget, "<UTC month>
// <usd>"); "" when tenant has no refuse budget (a cap budget reserves
// nothing: past it, tasks are capped in price, not refused).
func (bk *Book) Hold(tenant string, usd float64) string {
	b, ok := bk.budgetSet()[tenant]
	if !ok || b.MonthlyUSD <= 0 || !b.Refuse || bk.cfg.Ledgers == nil || bk.cfg.Shares == nil {
		return ""
	}
	return bk.cfg.Now().UTC().Format("2006-01") + " " + strconv.FormatFloat(max(usd, 0), 'f', 12, 64)
}

// Refused is the error of a task its region's store refused because its
// estimated cost does not fit in the region's share of its tenant's
// budget (queue/submit ErrBudget): 429 budget_exceeded, retried after the
// shares are next rebalanced.
func (bk *Book) Refused(tenant string) error {
	st, _ := bk.Of(tenant)
	bk.cfg.Metrics.Rejected.WithLabelValues(bk.cfg.Region, "budget").Inc()
	return &BudgetError{Tenant: tenant, Spent: st.SpentUSD, Budget: st.MonthlyUSD, RetryAfter: bk.cfg.ShareInterval, Reserved: true}
}

// budgetSet is the budgets in force (read-only).
func (bk *Book) budgetSet() map[string]Budget {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	return bk.set
}

// Set puts budgets in force in place of Config.Budgets (ax server's
// SIGHUP): a tenant's raised budget lets its submits, DAG runs and
// schedule slots through again from the next spend read (Loop reads
// it within Config.Refresh); a tenant no longer listed is no longer
// judged, and its gauge is removed.
func (bk *Book) Set(budgets map[string]Budget) {
	bk.mu.Lock()
	old := bk.set
	bk.set = maps.Clone(budgets)
	bk.mu.Unlock()
	for t := range old {
		if b, ok := budgets[t]; !ok || b.MonthlyUSD <= 0 {
			bk.cfg.Metrics.BudgetUsed.DeleteLabelValues(t)
		}
	}
	bk.cfg.Logger.Info("budgets set", "tenants", len(budgets))
}

// Loop rereads the spend of the tenants with a budget every
// Config.Refresh until ctx ends; while there is none (Set may
// add some) it reads nothing. Every server runs it (submits are judged on
// every server).
func (bk *Book) Loop(ctx context.Context) {
	refresh := func() {
		if len(bk.budgetSet()) == 0 {
			return
		}
		if err := bk.Refresh(ctx); err != nil && ctx.Err() == nil {
			bk.cfg.Logger.Warn("budgets: spend not read; judging by the last read", "err", err)
		}
	}
	refresh()
	t := time.NewTicker(bk.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		refresh()
	}
}

// Refresh reads this month's spend per tenant from every region and
// updates the budget gauges. A region that does not answer leaves its
// spend out (logged): a budget is judged on what could be read.
func (bk *Book) Refresh(ctx context.Context) error {
	now := bk.cfg.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	spend, unavailable, err := bk.spend.TenantSpend(ctx, from, to)
	if err != nil {
		return err
	}
	if len(unavailable) > 0 {
		bk.cfg.Logger.Warn("budgets: regions did not answer; their spend is left out", "regions", unavailable)
	}
	month := now.Format("2006-01")
	bk.mu.Lock()
	set := bk.set
	bk.month, bk.spent = month, spend
	if bk.warned == nil {
		bk.warned = map[string]string{}
	}
	var warn []string
	for t, b := range set {
		if b.MonthlyUSD > 0 && spend[t]/b.MonthlyUSD >= budgetWarn && bk.warned[t] != month {
			bk.warned[t] = month
			warn = append(warn, t)
		}
	}
	bk.mu.Unlock()
	for t, b := range set {
		if b.MonthlyUSD > 0 {
			bk.cfg.Metrics.BudgetUsed.WithLabelValues(t).Set(spend[t] / b.MonthlyUSD)
		}
	}
	for _, t := range warn {
		b := set[t]
		action := "refused"
		if !b.Refuse {
			action = "capped at $" + strconv.FormatFloat(b.PriceCap, 'g', 6, 64) + "/slot-hour"
		}
		bk.cfg.Logger.Warn("tenant past 80 % of its monthly budget; past 100 % its new tasks are "+action,
			"tenant", t, "spent_usd", spend[t], "monthly_budget_usd", b.MonthlyUSD, "month", month)
	}
	return nil
}

package apiv1

// Cost reports (GET /v1/cost, docs/cost.md).

// Query parameters of GET /v1/cost.
const (
	// CostGroupTenant and the others are the values of group_by=.
	CostGroupTenant = "tenant"
	CostGroupType   = "type"
	CostGroupPool   = "pool"
	CostGroupRegion = "region"
	CostGroupDay    = "day"
)

// CostGroups are the dimensions a cost report may be grouped by, in the
// order rows are sorted and the CLI prints them.
var CostGroups = []string{CostGroupTenant, CostGroupType, CostGroupPool, CostGroupRegion, CostGroupDay}

// CostRow is the spend of one group of a cost report: the dimensions it
// is grouped by are set, the others empty. Every figure is a sum over
// the attempts that ended in the group (succeeded or not).
type CostRow struct {
	Tenant string `json:"tenant,omitempty"`
	Type   string `json:"type,omitempty"`
	Pool   string `json:"pool,omitempty"`
	Region string `json:"region,omitempty"` // the region that ran the attempts
	Day    string `json:"day,omitempty"`    // UTC, YYYY-MM-DD

	Runs       int64   `json:"runs"`
	FailedRuns int64   `json:"failed_runs"`
	RunSeconds float64 `json:"run_seconds"`
	// SpendUSD is Σ price per slot-hour recorded at claim × run time.
	SpendUSD float64 `json:"spend_usd"`
	// ReferenceUSD is what the same run time would have cost on the
	// cheapest on-demand pool (any region) that carries the task's tags,
	// at that pool's price as the answering server sees it; for attempts
	// no on-demand pool fits it is their spend (UnreferencedRuns).
	ReferenceUSD float64 `json:"reference_usd"`
	// SavingsUSD is ReferenceUSD − SpendUSD (negative: dearer than it).
	SavingsUSD       float64 `json:"savings_usd"`
	SpotRuns         int64   `json:"spot_runs"`
	SpotSeconds      float64 `json:"spot_seconds"`
	UnreferencedRuns int64   `json:"unreferenced_runs"`
}

// CostReport answers GET /v1/cost?from=&to=&group_by=&tenant=&region=.
type CostReport struct {
	From    string    `json:"from"` // UTC days, inclusive
	To      string    `json:"to"`
	GroupBy []string  `json:"group_by"`
	Rows    []CostRow `json:"rows"`
	Total   CostRow   `json:"total"`
	// Regions count each region's runs in the report, or say why it did
	// not answer; those are in Unavailable too (their spend is missing).
	Regions     []RegionOutcome `json:"regions"`
	Unavailable []string        `json:"unavailable"`
	// Budgets are the monthly budgets of the report's tenants (a tenant's
	// token: its own) as the answering server judges them: this UTC
	// month's spend in every region, reread every 30 s, whatever the
	// report's range.
	Budgets []CostBudget `json:"budgets,omitempty"`
}

// CostBudget is one tenant's monthly budget (config tenants.<name>).
type CostBudget struct {
	Tenant           string  `json:"tenant"`
	MonthlyBudgetUSD float64 `json:"monthly_budget_usd"`
	SpentUSD         float64 `json:"spent_usd"`
	UsedRatio        float64 `json:"used_ratio"`
	OverBudget       string  `json:"over_budget"`         // cap or refuse: what happens past 100 %
	PriceCap         float64 `json:"price_cap,omitempty"` // USD per slot-hour, with cap
	State            string  `json:"state"`               // ok, warn (≥ 80 %) or over (≥ 100 %)
}

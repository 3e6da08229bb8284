// Package budget judges tenants by their monthly budgets (docs/cost.md
// "Budgets"): past its budget a tenant's new tasks are refused or capped in
// price, from the federation's spend that Book.Loop rereads.
//
// Each server reads the federation's spend of the tenants it has a budget for —
// the cost report of this UTC month grouped by tenant, every region's cost
// records (each region counts the attempts it ran in its own Redis) — every
// Config.Refresh, so the spend it judges by is at most that old plus the
// attempts still running (an attempt is recorded when it ends). At 80 % of
// its budget a tenant's ax_tenant_budget_used_ratio says so and one log
// line warns (once per server and month); past 100 % its new tasks are
// placed only on pools at or under its price cap ("cap": the submit is 422
// with the explanation when none fits), or refused ("refuse": 429
// budget_exceeded naming monthly_budget_usd).
package budget

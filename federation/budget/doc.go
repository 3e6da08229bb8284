// Package budget judges tenants by their monthly budgets (docs/cost.md
// "Budgets"): past its budget a tenant's new tasks are refused or capped in
// price, from the federation's spend that Book.Loop rereads.
package budget

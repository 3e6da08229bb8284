// Package metrics holds the federation's Prometheus series (ax_ prefix):
// submits, refusals, placement decisions, hand-offs, forwarded requests
// and budgets.
package metrics

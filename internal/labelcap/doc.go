// Package labelcap bounds the distinct values of a Prometheus label whose
// values come from users (tenant, task type): the first Max distinct values
// seen keep their own label value, every later one reads as Other. A
// submitter who invents a new tenant or type per task then costs one
// series, not one per task. Scoped caps values per scope (task types
// per tenant), so one tenant's names never take another's room.
//
// Which values win is first come, first served, per process: two
// processes can keep different sets once the cap is reached. Raise the cap
// (or give the busiest values to the early starters) if that matters.
package labelcap

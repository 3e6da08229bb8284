// Package federation is what every ax server does beyond its own region:
// it places submitted tasks on the cheapest healthy pool across regions,
// hands tasks off to other regions and receives theirs, follows a task
// wherever it lives, and keeps the global view of regions, pools and
// budgets.
//
// Boundary: federation → region → {queue, lease}; placement is pure and
// takes values; task and apiv1 are the model and the wire shapes. Schedules
// (package schedule) and DAG runs (package dag) each define the small
// interface they need (schedule.Enqueuer, dag.Tasks), which *Node
// implements (contracts_test.go), so federation imports neither.
package federation

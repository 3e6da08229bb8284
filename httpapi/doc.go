// Package httpapi is ax's HTTP API (docs/architecture.md §7) for one server: routing,
// bearer tokens and roles (auth.go), the one strict JSON decoder of request
// bodies (decode.go), the one mapping of errors to HTTP statuses and to the
// {"error":{code,message,field}} shape (errors.go), the dashboard, and the
// handlers: tasks, the federation-wide listings and bulk actions, regions
// and drains, placement explanations, events (tasks.go); schedules
// (schedules.go); DAG runs (dags.go); and the endpoints other ax servers
// call with the cluster token: hand-offs and schedule firings (handoff.go).
//
// Boundary: httpapi → federation (the submission path, task reads and
// actions wherever a task lives, fan-outs, the receiving side of
// hand-offs), and apiv1, task, queue, placement. Schedules and DAG runs are
// served through interfaces defined here (Schedules, DAGs), which
// *schedule.Scheduler and *dag.Runs implement, so httpapi imports neither:
// their errors are *apiv1.Error (they name their code) or the task and
// queue sentinels, mapped in errors.go like every other. cmd/ax wires the
// implementations in (Config); only cmd/ax, and internal/fedtest/fedapi for
// tests, import this package.
//
// At about 2 400 lines of non-test Go (comments and blank lines aside;
// 2 950 with them) it is at the 2 500 the house allows a package: one
// file per route family, all on the one decoder, the one error map and
// auth; the dashboard's pages are embedded files, not Go.
package httpapi

// Package httpapi is ax's HTTP API (docs/architecture.md §7) for one server:
// the router (bearer tokens, roles, the hop count), the task, listing,
// region and placement endpoints, /readyz and /metrics; the other families
// of endpoints are its sub-packages, and endpoint is what they all share.
//
// Boundary: httpapi → federation, apiv1, task, placement. Handlers reach the
// federation only through the small interfaces they define, which
// *federation.Node implements; schedules and DAG runs through Schedules and
// DAGs, which *schedule.Scheduler and *dag.Runs implement.
package httpapi

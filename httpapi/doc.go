// Package httpapi is ax's HTTP API (docs/architecture.md §7) for one server:
// routing, bearer tokens and roles (auth.go), the one strict JSON decoder of
// request bodies (decode.go), the one table of error codes and their HTTP
// statuses (errors.go), the dashboard, and the handlers of tasks, listings,
// regions, events, schedules, DAG runs and the internal hand-off endpoints.
//
// Boundary: httpapi → federation, apiv1, task, placement; it reaches the
// region's store only through the federation, and schedules and DAG runs
// through the interfaces it defines (Schedules, DAGs).
package httpapi

// Package apiv1 holds the JSON shapes of ax's HTTP API (docs/architecture.md §7), shared
// by the server (packages federation, schedule, dag and the HTTP API) and
// the Go client (package client).
// It holds types only (and Error is also a Go error: see there); it
// imports task alone, so the client compiles no database driver.
package apiv1

// Package worker is the Go worker runtime: it serves one pool of one region,
// claiming tasks from a Source (the region's store, or the API's worker
// protocol), running the handler registered for each task's type, keeping the
// leases alive and recording every outcome. `ax worker` is built on it, and so
// is any program that runs its own handlers (Example; built-in handlers are in
// worker/handlers).
package worker

// Package workertest runs workers against a real Redis (internal/testenv)
// for the tests of package worker and its built-in handlers: a store with a
// short lease, pinned submits, a stand-in leader that promotes retries, and
// waits on task states.
package workertest

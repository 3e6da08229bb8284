// Package redisproc runs a redis-server child process: on a free port (or a
// given one), in a data directory, with the options ax uses (append-only
// file and its fsync policy, a password, cluster mode, extra directives).
//
// Start returns only once the server is usable: it answers PING with PONG,
// which a Redis still loading its append-only file or snapshot does not (it
// answers LOADING, for seconds with a large dataset), and the answer comes
// from this child and not from another server on the port. Stop ends it with
// SIGTERM, then SIGKILL after a grace period, and waits until it is gone, so
// a new server can start on the same port and directory right after.
//
// The child dies with its parent even if the parent is killed: on Linux by
// the kernel's parent-death signal, elsewhere by a shell watchdog (see
// proc_bsd.go). It runs in its own process group, so a Ctrl-C in the
// parent's terminal does not reach it: its owner stops it, in order.
//
// Users: `ax dev` (one Redis per region, on its state directory), `ax bench`
// (a throwaway server) and internal/testenv (tests). The package knows
// nothing of ax's keys or data; it is a process supervisor with a Redis
// readiness probe.
package redisproc

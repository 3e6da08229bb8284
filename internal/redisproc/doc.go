// Package redisproc runs a redis-server child process: on a free port (or a
// given one), in a data directory, with the options ax uses (append-only
// file and its fsync policy, a password, cluster mode, extra directives).
// It knows nothing of ax's keys or data.
package redisproc

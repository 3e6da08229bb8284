// Package placement decides which pool, in which region, a task should run in: the pure core
// of docs/architecture.md §5. It takes plain values (a [Snapshot] of every pool's published
// figures, a [Task], the time) and returns a [Decision]; it does no I/O, starts no goroutines and
// imports nothing else of ax.
package placement

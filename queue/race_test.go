//go:build race

package queue

// raceEnabled: the race detector slows single-goroutine walks several times.
const raceEnabled = true

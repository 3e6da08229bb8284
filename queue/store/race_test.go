//go:build race

package store_test

// raceEnabled: the race detector slows single-goroutine walks several times.
const raceEnabled = true

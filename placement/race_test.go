//go:build race

package placement

// raceEnabled: the race detector slows CPU-bound walks about a hundredfold.
const raceEnabled = true

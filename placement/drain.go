package placement

import "time"

// DrainMeter measures how fast a pool finishes tasks: the [Pool.DrainRate] a region leader
// publishes. It is fed a running count of finished tasks at each reading of the store and
// returns the rate over the last window. It is not safe for concurrent use (one leader loop owns
// it); the zero value is not usable, call [NewDrainMeter].
//
// Over a window rather than since the last reading: completions come in batches (a claim of
// many short tasks, a publication every second), and a rate from one interval swings between 0
// and several times the truth; a window of tens of seconds follows a pool gaining or losing
// workers within that time and reads steady in between.
type DrainMeter struct {
	window  time.Duration
	samples []drainSample // oldest first; the first one at or before now − window
}

type drainSample struct {
	at    time.Time
	count int64
}

// NewDrainMeter returns a meter over window (> 0; the default a region uses is 30 s).
func NewDrainMeter(window time.Duration) *DrainMeter {
	return &DrainMeter{window: max(window, time.Second)}
}

// Observe records that count tasks (a running total that only grows; a drop, after a store
// restarted empty, restarts the measure) had finished by now, and returns the rate in tasks per
// second over the window: 0 until two readings a second apart exist.
func (m *DrainMeter) Observe(now time.Time, count int64) float64 {
	if n := len(m.samples); n > 0 && (count < m.samples[n-1].count || now.Before(m.samples[n-1].at)) {
		m.samples = m.samples[:0]
	}
	m.samples = append(m.samples, drainSample{now, count})
	// Keep one sample at or before the window's start, so the rate spans the whole window.
	cut := 0
	for cut+1 < len(m.samples) && !m.samples[cut+1].at.After(now.Add(-m.window)) {
		cut++
	}
	if cut > 0 {
		m.samples = append(m.samples[:0], m.samples[cut:]...)
	}
	first := m.samples[0]
	span := now.Sub(first.at).Seconds()
	if span < 1 {
		return 0
	}
	return float64(count-first.count) / span
}

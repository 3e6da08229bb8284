package placement

import "time"

// DrainMeter measures how fast a pool finishes tasks when its slots are busy: the
// [Pool.DrainRate] a region leader publishes. It is fed, at each reading of the store, a running
// count of finished tasks and how many of the pool's slots were busy, and returns finished tasks
// per second over a recent window divided by the window's mean utilisation. It is not safe for
// concurrent use (one leader loop owns it); build it with [NewDrainMeter].
//
// Why divided by utilisation: a new task waits only while every slot is busy, so the rate that
// matters is the saturated one; a pool at 60 % use finishes 60 % of what it could, and its raw
// rate would overstate the wait of the next queue by 1/0.6. Why a window of at least MinRuns
// completions as well as at least a duration: a pool of 2-minute tasks finishes a few in 30 s,
// and a rate from so few swings by half between readings.
type DrainMeter struct {
	window  time.Duration
	samples []drainSample // oldest first, from head
	head    int
}

type drainSample struct {
	at    time.Time
	count int64
	// busy is the integral of utilisation (busy slots ÷ slots) over time up to at, in seconds.
	busy float64
	util float64 // utilisation at at
}

// The window spans at least drainMinWindow and drainMinRuns completions, at most its maximum.
const (
	drainMinWindow = 30 * time.Second
	drainMinRuns   = 20
	// A window in which the pool was almost idle says nothing about its saturated pace.
	drainMinUtil = 0.1
)

// NewDrainMeter returns a meter whose window grows up to maxWindow (≥ 30 s; a region uses 10
// minutes) until it holds 20 completions.
func NewDrainMeter(maxWindow time.Duration) *DrainMeter {
	return &DrainMeter{window: max(maxWindow, drainMinWindow)}
}

// Observe records that count tasks (a running total that only grows; a drop, after a store
// restarted empty, restarts the measure) had finished by now, with busy of slots busy, and
// returns the saturated drain rate in tasks per second: 0 when not known (less than 30 s of
// readings, or the pool nearly idle over them).
func (m *DrainMeter) Observe(now time.Time, count int64, busy, slots int) float64 {
	util := 0.0
	if slots > 0 {
		util = min(1, float64(busy)/float64(slots))
	}
	n := len(m.samples)
	if n > m.head && (count < m.samples[n-1].count || now.Before(m.samples[n-1].at)) {
		m.samples, m.head, n = m.samples[:0], 0, 0
	}
	s := drainSample{at: now, count: count, util: util}
	if n > m.head {
		last := m.samples[n-1]
		// The trapezoid between two readings.
		s.busy = last.busy + now.Sub(last.at).Seconds()*(last.util+util)/2
	}
	m.samples = append(m.samples, s)
	// Drop what the longest window no longer needs (keep one sample at or before its start);
	// compacted only once half is dropped, so a reading costs O(log n).
	for m.head+1 < len(m.samples) && !m.samples[m.head+1].at.After(now.Add(-m.window)) {
		m.head++
	}
	if m.head > 0 && m.head*2 >= len(m.samples) {
		m.samples = append(m.samples[:0], m.samples[m.head:]...)
		m.head = 0
	}
	live := m.samples[m.head:]
	// The newest start that spans both minimums, else the oldest sample. Older samples have
	// earlier times and smaller counts, so the ones that qualify are a prefix: search it.
	ok := func(i int) bool {
		c := &live[i]
		return now.Sub(c.at) >= drainMinWindow && count-c.count >= drainMinRuns
	}
	lo, hi := 0, len(live) // the prefix [0, lo) qualifies, [hi, n) does not
	for lo < hi {
		if mid := int(uint(lo+hi) >> 1); ok(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	first := live[max(lo-1, 0)]
	span := now.Sub(first.at).Seconds()
	if span < drainMinWindow.Seconds() {
		return 0
	}
	meanUtil := (s.busy - first.busy) / span
	if meanUtil < drainMinUtil {
		return 0
	}
	return float64(count-first.count) / span / meanUtil
}

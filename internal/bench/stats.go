package bench

import (
	"slices"
	"sync"
	"time"
)

// Samples collects durations; percentiles are exact (sorted at the end).
// A run records at most a few million, a few MB.
type Samples struct {
	mu sync.Mutex
	v  []time.Duration
}

// Add records one duration.
func (s *Samples) Add(d time.Duration) {
	s.mu.Lock()
	s.v = append(s.v, d)
	s.mu.Unlock()
}

// AddN records d n times (n tasks that took the same time).
func (s *Samples) AddN(d time.Duration, n int) {
	s.mu.Lock()
	for range n {
		s.v = append(s.v, d)
	}
	s.mu.Unlock()
}

// Dist is the distribution of a Samples set.
type Dist struct {
	N             int
	P50, P99, Max time.Duration
}

// Dist is the distribution of what was recorded so far.
func (s *Samples) Dist() Dist {
	s.mu.Lock()
	v := slices.Clone(s.v)
	s.mu.Unlock()
	if len(v) == 0 {
		return Dist{}
	}
	slices.Sort(v)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(v))+0.5) - 1
		return v[max(0, min(i, len(v)-1))]
	}
	return Dist{N: len(v), P50: at(0.50), P99: at(0.99), Max: v[len(v)-1]}
}

// Ms is d in milliseconds, as the summaries report durations.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

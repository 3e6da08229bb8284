package bench

import (
	"slices"
	"sync"
	"time"
)

// samples collects durations; percentiles are exact (sorted at the end).
// A run records at most a few million, a few MB.
type samples struct {
	mu sync.Mutex
	v  []time.Duration
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.v = append(s.v, d)
	s.mu.Unlock()
}

func (s *samples) addN(d time.Duration, n int) {
	s.mu.Lock()
	for range n {
		s.v = append(s.v, d)
	}
	s.mu.Unlock()
}

// dist is the distribution of a samples set.
type dist struct {
	N             int
	P50, P99, Max time.Duration
}

func (s *samples) dist() dist {
	s.mu.Lock()
	v := slices.Clone(s.v)
	s.mu.Unlock()
	if len(v) == 0 {
		return dist{}
	}
	slices.Sort(v)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(v))+0.5) - 1
		return v[max(0, min(i, len(v)-1))]
	}
	return dist{N: len(v), P50: at(0.50), P99: at(0.99), Max: v[len(v)-1]}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

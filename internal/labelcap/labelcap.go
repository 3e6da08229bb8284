package labelcap

import "sync"

// Other is the label value of every value past the cap.
const Other = "_other"

// Set keeps the first Max distinct values. The zero Set is not usable; use
// New. It is safe for concurrent use.
type Set struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
}

// New returns a Set keeping up to max distinct values; max ≤ 0 keeps none
// (every value reads as Other).
func New(max int) *Set {
	return &Set{max: max, seen: make(map[string]struct{})}
}

// Value is v while v is one of the kept values (or there is still room to
// keep it), Other otherwise.
func (s *Set) Value(v string) string {
	s.mu.RLock()
	_, ok := s.seen[v]
	s.mu.RUnlock()
	if ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[v]; ok {
		return v
	}
	if len(s.seen) >= s.max {
		return Other
	}
	s.seen[v] = struct{}{}
	return v
}

package labelcap

import "sync"

// Scoped caps a label whose values belong to a scope (a task type to its
// tenant): each scope keeps its own first perScope values, so one
// tenant's many types never push another tenant's into Other. Scopes are
// capped too: past maxScopes, a new scope reads as Other and its values
// share Other's set. The zero Scoped is not usable; use NewScoped. It is
// safe for concurrent use.
type Scoped struct {
	scopes   *Set
	perScope int
	mu       sync.RWMutex
	sets     map[string]*Set
}

// NewScoped returns a Scoped keeping up to maxScopes scopes of up to
// perScope values each (≤ 0: none, every value reads as Other).
func NewScoped(maxScopes, perScope int) *Scoped {
	return &Scoped{scopes: New(maxScopes), perScope: perScope, sets: map[string]*Set{}}
}

// Values returns the label values of scope and v: each is itself while
// kept, Other past its cap.
func (s *Scoped) Values(scope, v string) (string, string) {
	scope = s.scopes.Value(scope)
	s.mu.RLock()
	set := s.sets[scope]
	s.mu.RUnlock()
	if set == nil {
		s.mu.Lock()
		if set = s.sets[scope]; set == nil {
			set = New(s.perScope)
			s.sets[scope] = set
		}
		s.mu.Unlock()
	}
	return scope, set.Value(v)
}

package labelcap

import (
	"fmt"
	"sync"
	"testing"
)

func TestSetKeepsTheFirstMaxValues(t *testing.T) {
	s := New(2)
	for _, c := range []struct{ in, want string }{
		{"a", "a"}, {"b", "b"}, {"a", "a"}, {"c", Other}, {"b", "b"}, {"d", Other},
	} {
		if got := s.Value(c.in); got != c.want {
			t.Fatalf("Value(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := New(0).Value("x"); got != Other {
		t.Fatalf("New(0).Value = %q, want %q", got, Other)
	}
}

// Under concurrent use the cap holds: never more than Max kept values.
func TestSetCapHoldsConcurrently(t *testing.T) {
	s := New(10)
	var wg sync.WaitGroup
	kept := make(chan string, 1000)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if v := s.Value(fmt.Sprintf("t%d-%d", g, i)); v != Other {
					kept <- v
				}
			}
		}()
	}
	wg.Wait()
	close(kept)
	n := 0
	for range kept {
		n++
	}
	if n != 10 {
		t.Fatalf("%d values kept, want 10", n)
	}
}

// One scope's values past its cap read as Other; another scope keeps
// room for its own; scopes past their cap share Other's values.
func TestScopedCapsEachScope(t *testing.T) {
	s := NewScoped(2, 2)
	for _, c := range []struct{ scope, v, wantScope, want string }{
		{"a", "x", "a", "x"}, {"a", "y", "a", "y"}, {"a", "z", "a", Other},
		{"b", "z", "b", "z"}, {"b", "x", "b", "x"}, {"a", "x", "a", "x"},
		{"c", "x", Other, "x"}, {"d", "y", Other, "y"}, {"e", "z", Other, Other},
	} {
		if scope, v := s.Values(c.scope, c.v); scope != c.wantScope || v != c.want {
			t.Fatalf("Values(%q, %q) = %q, %q; want %q, %q", c.scope, c.v, scope, v, c.wantScope, c.want)
		}
	}
}

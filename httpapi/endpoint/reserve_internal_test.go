package endpoint

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestReserveRefusesTheTopTenantThenEveryone: under maxmemory × (1 −
// share) nothing is refused; past it only the tenant holding the most
// payload bytes (429 naming memory_reserve); past maxmemory × (1 −
// share/4) everyone (503 with Retry-After). Readings are at most one a
// second, and an unreadable memory refuses nothing.
func TestReserveRefusesTheTopTenantThenEveryone(t *testing.T) {
	now := time.Unix(1000, 0)
	use := MemoryUse{Used: 50, Max: 100, Top: "flood"}
	var readErr error
	reads := 0
	share := 0.2
	r := NewReserve(func() float64 { return share }, func(context.Context) (MemoryUse, error) {
		reads++
		return use, readErr
	})
	r.now = func() time.Time { return now }
	status := func(tenant string) int {
		t.Helper()
		err := r.Admit(context.Background(), tenant, 0)
		if err == nil {
			return http.StatusOK
		}
		var e *Error
		if !errors.As(err, &e) || e.RetryAfter <= 0 {
			t.Fatalf("refusal %v: want an *Error with Retry-After", err)
		}
		if e.Status() == http.StatusTooManyRequests && e.Field != "memory_reserve" {
			t.Fatalf("429 names %q, want memory_reserve", e.Field)
		}
		return e.Status()
	}
	steps := []struct {
		used          int64
		flood, others int
	}{
		{50, 200, 200},
		{79, 200, 200},
		{80, 429, 200}, // 1 − 0.2
		{94, 429, 200},
		{95, 503, 503}, // 1 − 0.2/4
		{60, 200, 200},
	}
	for _, s := range steps {
		use.Used = s.used
		now = now.Add(ReserveRefresh)
		if f, o := status("flood"), status("other"); f != s.flood || o != s.others {
			t.Fatalf("used %d of 100: flood %d, other %d; want %d, %d", s.used, f, o, s.flood, s.others)
		}
	}
	// Within a second the last reading stands.
	before := reads
	use.Used = 99
	for range 5 {
		if st := status("other"); st != http.StatusOK {
			t.Fatalf("a stale reading of 60 %%: %d, want 200", st)
		}
	}
	if reads != before {
		t.Fatalf("%d readings within a second, want none", reads-before)
	}
	// An unreadable memory keeps the last reading; the default tenant is "default".
	now = now.Add(ReserveRefresh)
	readErr = errors.New("down")
	if st := status("other"); st != http.StatusOK {
		t.Fatalf("unreadable: %d, want 200 (the last reading)", st)
	}
	readErr, use = nil, MemoryUse{Used: 85, Max: 100, Top: "default"}
	now = now.Add(ReserveRefresh)
	if st := status(""); st != http.StatusTooManyRequests {
		t.Fatalf("the default tenant at the top: %d, want 429", st)
	}
	// No maxmemory, or the reserve off: nothing is refused.
	use, share = MemoryUse{Used: 1 << 40, Top: "flood"}, 0.2
	now = now.Add(ReserveRefresh)
	if st := status("flood"); st != http.StatusOK {
		t.Fatalf("no maxmemory: %d, want 200", st)
	}
	use, share = MemoryUse{Used: 99, Max: 100, Top: "flood"}, 0
	now = now.Add(ReserveRefresh)
	if st := status("flood"); st != http.StatusOK {
		t.Fatalf("reserve off: %d, want 200", st)
	}
	var nilReserve *Reserve
	if err := nilReserve.Admit(context.Background(), "x", 1); err != nil {
		t.Fatal(err)
	}

	// Payloads admitted since the reading count as used: 70 % read, then
	// 10 % admitted through this server, and the next is in the reserve.
	use, share = MemoryUse{Used: 70, Max: 100, Top: "flood"}, 0.2
	now = now.Add(ReserveRefresh)
	if err := r.Admit(context.Background(), "flood", 10); err != nil {
		t.Fatal(err)
	}
	if st := status("flood"); st != http.StatusTooManyRequests {
		t.Fatalf("70 read + 10 admitted of 100: %d, want 429", st)
	}
	now = now.Add(ReserveRefresh)
	if st := status("flood"); st != http.StatusOK {
		t.Fatalf("a new reading of 70: %d, want 200 (the admitted bytes are in it)", st)
	}
}

package endpoint

import (
	"errors"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
)

// TestLongPollsCapPerCallerAndServer: a caller past its cap gets 429
// saturated naming what is capped (this tenant, or this token) and the cap;
// another caller still gets a place until the server's cap, whose 429 says
// so; a release makes room again and a second release of the same place
// changes nothing.
func TestLongPollsCapPerCallerAndServer(t *testing.T) {
	l := NewLongPolls(3, 1)
	ta, err := l.Acquire("token:acme-workers")
	if err != nil {
		t.Fatal(err)
	}
	saturated := func(who, want string) {
		t.Helper()
		_, err := l.Acquire(who)
		var e *Error
		if !errors.As(err, &e) || e.Code != apiv1.CodeSaturated || e.RetryAfter <= 0 || !strings.Contains(e.Msg, want) {
			t.Fatalf("Acquire(%q): %v, want saturated with Retry-After naming %q", who, err, want)
		}
	}
	saturated("token:acme-workers", "for this token on this server: at most 1 per token")
	if _, err := l.Acquire("token:acme-workers-2"); err != nil { // the same tenant's other token
		t.Fatalf("another token: %v", err)
	}
	if _, err := l.Acquire("tenant:acme"); err != nil {
		t.Fatalf("a tenant: %v", err)
	}
	saturated("tenant:acme", "for this tenant on this server: at most 1 per tenant")
	saturated("tenant:globex", "on this server: at most 3")
	ta()
	ta()
	if _, err := l.Acquire("token:acme-workers"); err != nil {
		t.Fatalf("after its release: %v", err)
	}
	saturated("", "on this server: at most 3")
}

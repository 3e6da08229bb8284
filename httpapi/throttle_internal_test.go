package httpapi

import (
	"testing"
	"time"
)

func TestFailureLimiterThrottlesOneClient(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	f := NewFailureLimiter(3, nil)
	f.now = func() time.Time { return now }
	for i := 0; i < 3; i++ {
		if w := f.Wait("10.0.0.1"); w != 0 {
			t.Fatalf("failure %d: wait %s before the burst is spent", i, w)
		}
		f.Fail("10.0.0.1")
	}
	if w := f.Wait("10.0.0.1"); w != 20*time.Second {
		t.Fatalf("after the burst: wait %s, want 20s (one failure per 60s/3)", w)
	}
	if w := f.Wait("10.0.0.2"); w != 0 {
		t.Fatalf("another client waits %s", w)
	}
	// One IPv6 host holds a whole /64.
	for i := 0; i < 3; i++ {
		f.Fail("2001:db8::1")
	}
	if w := f.Wait("2001:db8::ffff"); w == 0 {
		t.Fatal("another address of the same /64 is not throttled")
	}
	now = now.Add(20 * time.Second)
	if w := f.Wait("10.0.0.1"); w != 0 {
		t.Fatalf("after 20s: wait %s", w)
	}
	var nilLimiter *FailureLimiter
	nilLimiter.Fail("x")
	if nilLimiter.Wait("x") != 0 {
		t.Fatal("a nil limiter throttles")
	}
}

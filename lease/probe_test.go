package lease

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
)

// A probe turns unhealthy within interval + timeout of etcd going silent
// (a stalled proxy: calls hang, nothing errors) and healthy again within
// an interval of it answering, and reports why.
func TestProbeFollowsEtcdWithinItsBound(t *testing.T) {
	checkLeaks(t)
	e := testenv.StartEtcd(t)
	px := testenv.StartProxy(t, e.Endpoint())
	c := newClient(t, px.URL())
	const interval, timeout = 200 * time.Millisecond, 400 * time.Millisecond
	p := NewProbe(c, "/ax/probe", interval, timeout)
	defer p.Close()
	if err := p.Err(); err == nil {
		t.Fatal("healthy before any answer")
	}
	waitTrue(t, 5*time.Second, "probe healthy", p.Healthy)

	px.Freeze()
	frozen := time.Now()
	waitTrue(t, 5*time.Second, "probe unhealthy after the stall", func() bool { return !p.Healthy() })
	// The bound is the probe's contract (readyz and the gauge rely on it);
	// one extra interval of slack for a loaded machine.
	if d := time.Since(frozen); d > interval+timeout+interval+time.Second {
		t.Fatalf("unhealthy only %v after the stall (bound %v)", d, interval+timeout)
	}
	if p.Err() == nil {
		t.Fatal("unhealthy with no reason")
	}
	px.Thaw()
	waitTrue(t, 5*time.Second, "probe healthy after the stall", p.Healthy)
	if err := p.Err(); err != nil {
		t.Fatalf("healthy with reason %v", err)
	}
}

func waitTrue(t *testing.T, within time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

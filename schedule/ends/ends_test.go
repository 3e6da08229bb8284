package ends_test

import (
	"context"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/schedule/ends"
	"github.com/ax-sched/ax/task"
)

// An end recorded wakes the watcher with its tenant and schedule, after
// the wake of every gate the watch starts with; another prefix's ends do
// not reach it.
func TestRunEndWakesWatcher(t *testing.T) {
	c := testenv.StartEtcd(t).Client()
	l, other := ends.New(c, "/ax/"), ends.New(c, "/other/")
	ctx, cancel := context.WithCancel(context.Background())
	woken := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.WatchEnds(ctx, func(tenant, name string) { woken <- tenant + "|" + name })
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func() string {
		t.Helper()
		select {
		case w := <-woken:
			return w
		case <-time.After(10 * time.Second):
			t.Fatal("no wake within 10 s")
			return ""
		}
	}
	if w := next(); w != "|" {
		t.Fatalf("first wake %q, want every gate (empty tenant and schedule)", w)
	}
	period := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	if err := other.RunEnded(ctx, "acme", "elsewhere", period, "id0", task.DAGSuccess); err != nil {
		t.Fatal(err)
	}
	if err := l.RunEnded(ctx, "acme", "nightly", period, "id1", task.DAGSuccess); err != nil {
		t.Fatal(err)
	}
	if w := next(); w != "acme|nightly" {
		t.Fatalf("wake %q, want acme|nightly", w)
	}
	if got := ends.Key("/ax/", "acme", "nightly"); got != "/ax/schedule-ends/acme/nightly" {
		t.Fatalf("Key %q", got)
	}
}

package region

import (
	"context"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue/read"
)

type startsFunc func(after []string) ([]read.Start, []string, error)

func (f startsFunc) RecentStarts(_ context.Context, after []string, _ int) ([]read.Start, []string, error) {
	return f(after)
}

// The window's p99 is the nearest rank over the last minute's claims of
// the pool, none below waitMinSample, and it resumes from the ids the
// previous read returned.
func TestWaitWindowP99OverTheLastMinute(t *testing.T) {
	var w waitWindow
	now := time.Unix(1_700_000_000, 0)
	batch := func(pool string, waits ...time.Duration) startsFunc {
		return func(after []string) ([]read.Start, []string, error) {
			var ss []read.Start
			for _, d := range waits {
				ss = append(ss, read.Start{Pool: pool, Wait: d})
			}
			return ss, append(after, "x"), nil
		}
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	if err := w.look(context.Background(), batch("cpu", ms(1), ms(2), ms(3), ms(4)), now); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.p99("cpu"); ok {
		t.Fatal("a p99 from 4 observations")
	}
	var hundred []time.Duration
	for i := 1; i <= 96; i++ {
		hundred = append(hundred, ms(i))
	}
	if err := w.look(context.Background(), batch("cpu", hundred...), now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	// 100 observations: 1-4 and 1-96 ms; the 99th of 100 sorted is 95 ms.
	if got, ok := w.p99("cpu"); !ok || got != 0.095 {
		t.Fatalf("p99 over 100 = %v %v, want 0.095", got, ok)
	}
	if _, ok := w.p99("gpu"); ok {
		t.Fatal("a p99 for a pool without claims")
	}
	if len(w.after) != 2 {
		t.Fatalf("after = %v: each read resumes from the last", w.after)
	}
	// 61 s after the first look its four fall out; 90 s after, all.
	if err := w.look(context.Background(), batch("cpu"), now.Add(61*time.Second)); err != nil || len(w.obs) != 96 {
		t.Fatalf("after 61 s: %d observations (%v), want 96", len(w.obs), err)
	}
	if err := w.look(context.Background(), batch("cpu"), now.Add(91*time.Second)); err != nil || len(w.obs) != 0 {
		t.Fatalf("after 91 s: %d observations, want 0", len(w.obs))
	}
}

package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-sched/ax/worker"
)

// Noop succeeds at once, whatever its payload.
func Noop(context.Context, *worker.Task) error { return nil }

var _ worker.Handler = Noop

// sleepProgressEvery is how often Sleep reports how far it got.
const sleepProgressEvery = 250 * time.Millisecond

// Sleep waits the payload's {"ms": N} milliseconds, or until ctx ends,
// reporting its progress (the share of the time slept) as it goes.
func Sleep(ctx context.Context, t *worker.Task) error {
	var p struct {
		MS *int64 `json:"ms"`
	}
	if err := t.Decode(&p); err != nil {
		return err
	}
	if p.MS == nil || *p.MS < 0 {
		return worker.NonRetryable(errors.New(`sleep: payload needs {"ms": N} with N ≥ 0`))
	}
	d := time.Duration(*p.MS) * time.Millisecond
	start := time.Now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(sleepProgressEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			slept := time.Since(start)
			t.SetProgress(int(100*slept/d), fmt.Sprintf("slept %v of %v", slept.Truncate(time.Millisecond), d))
		case <-timer.C:
			t.SetProgress(100, fmt.Sprintf("slept %v", d))
			t.SetResult(fmt.Sprintf("slept %v", d))
			return nil
		case <-ctx.Done():
			return fmt.Errorf("sleep interrupted: %w", context.Cause(ctx))
		}
	}
}

var _ worker.Handler = Sleep

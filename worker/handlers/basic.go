package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-sched/ax/worker"
)

// Noop succeeds at once.
func Noop(context.Context, *worker.Task) error { return nil }

var _ worker.Handler = Noop

// Sleep waits the payload's {"ms": N} milliseconds, or until ctx ends.
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
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		t.SetResult(fmt.Sprintf("slept %v", d))
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sleep interrupted: %w", context.Cause(ctx))
	}
}

var _ worker.Handler = Sleep

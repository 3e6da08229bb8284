package region

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
)

// service is one leader service of a term: Start runs it in a goroutine of
// its own until Stop or ctx ends; Stop cancels it and returns once it has.
type service interface {
	Start(ctx context.Context)
	Stop()
}

// startStop owns a service's one goroutine. A service embeds it and calls
// start with its loop. start runs the loop at most once; Stop may be called
// any number of times, concurrently, and before start (then it does
// nothing).
type startStop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs loop under a child of ctx, unless the service has started.
func (s *startStop) start(ctx context.Context, loop func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		loop(ctx)
	}()
}

// Stop cancels the loop and waits until it has returned.
func (s *startStop) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

// term is what every leader service of one term shares: the fence its
// writes carry and what to do when a write of theirs fails.
type term struct {
	fence  queue.Fence
	region string
	log    *slog.Logger
	// lost resigns the term when err is queue.ErrFenced (a newer leader
	// exists); it ends every service's ctx.
	lost func(err error)
}

// failedPause is how long a service waits after an error that did not end
// its term before it tries again.
const failedPause = 200 * time.Millisecond

// failed handles a service's error: true when the service must return
// (its write was fenced, or ctx ended); otherwise it logs err and pauses.
func (t *term) failed(ctx context.Context, op string, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	if errors.Is(err, queue.ErrFenced) {
		t.lost(err)
		return true
	}
	t.log.Warn("leader loop error", "op", op, "err", err)
	return !sleep(ctx, failedPause, nil)
}

// sleep waits for d, a wake-up, or ctx; false when ctx ended.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	}
	return true
}

// untilNext is how long to sleep until next, between a millisecond and
// maxSleep; maxSleep when next is zero (nothing scheduled).
func untilNext(next time.Time, maxSleep time.Duration) time.Duration {
	if next.IsZero() {
		return maxSleep
	}
	return min(max(time.Until(next), time.Millisecond), maxSleep)
}

// loopService runs a LeaderLoop as a service.
type loopService struct {
	startStop
	loop LeaderLoop
	term *term
}

var _ service = (*loopService)(nil)

func (s *loopService) Start(ctx context.Context) {
	s.start(ctx, func(ctx context.Context) { s.loop(ctx, s.term.fence, s.term.lost) })
}

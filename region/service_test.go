package region

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// A service runs its loop once however often it is started, and Stop may be
// called before Start, twice, and from several goroutines at once; each
// Stop returns only once the loop has.
func TestStartStopToleratesDoubleStops(t *testing.T) {
	var s startStop
	s.Stop() // before start: nothing to stop
	var runs, running atomic.Int32
	loop := func(ctx context.Context) {
		runs.Add(1)
		running.Store(1)
		<-ctx.Done()
		running.Store(0)
	}
	s.start(context.Background(), loop)
	s.start(context.Background(), loop)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Stop()
			if running.Load() != 0 {
				t.Error("Stop returned before the loop did")
			}
		}()
	}
	wg.Wait()
	s.Stop()
	if n := runs.Load(); n != 1 {
		t.Fatalf("loop ran %d times, want 1", n)
	}
}

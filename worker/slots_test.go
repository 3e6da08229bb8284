package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

// A worker of one slot runs four quarter-slot tasks at once and never
// more than its slot: a whole task runs alone, the quarter tasks behind it
// wait for it, and every task ends once.
func TestFractionalSlotsPackOneSlot(t *testing.T) {
	e := wt.New(t)
	quarter := func(s *task.Spec) { s.Slots = 0.25 }
	ids := e.Submit("work", nil, 8, quarter)
	ids = append(ids, e.Submit("work", nil, 1)...)
	ids = append(ids, e.Submit("work", nil, 4, quarter)...)
	w := e.Worker(worker.Options{Concurrency: 1})
	var mu sync.Mutex
	var held, peak float64
	var running, peakRunning int
	w.Handle("work", func(ctx context.Context, tk *worker.Task) error {
		mu.Lock()
		held += tk.Slots
		running++
		peak, peakRunning = max(peak, held), max(peakRunning, running)
		mu.Unlock()
		time.Sleep(60 * time.Millisecond)
		mu.Lock()
		held -= tk.Slots
		running--
		mu.Unlock()
		return nil
	})
	e.Run(w)
	for _, id := range ids {
		e.WaitState(id, task.Success, 20*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > 1+1e-9 {
		t.Fatalf("held %.3f slots at once on a worker of 1", peak)
	}
	if peakRunning != 4 {
		t.Fatalf("at most %d tasks ran at once, want the 4 quarters", peakRunning)
	}
	for _, id := range ids {
		if tk := e.Get(id); tk.Attempts != 1 {
			t.Errorf("%s: %d attempts", id, tk.Attempts)
		}
	}
}

package worker

import (
	"context"
	"sync"
	"time"

	"github.com/ax-sched/ax/task"
)

// progressStore is a direct store's write of a task's progress.
type progressStore interface {
	Progress(ctx context.Context, id, token string, p task.Progress) error
}

// progressFunc is what Task.SetProgress calls for job j: the Source's own
// (Remote batches it into its reports), else a write per call to a
// direct store, coalesced (one write in flight per task, the newest
// progress next), else nil.
func (w *Worker) progressFunc(id, token string) func(percent int, message string) {
	switch s := w.store.(type) {
	case Progressor:
		return func(percent int, message string) { s.Progress(id, token, percent, message) }
	case progressStore:
		var mu sync.Mutex
		var next *task.Progress
		busy := false
		return func(percent int, message string) {
			mu.Lock()
			next = &task.Progress{Percent: float64(percent), Message: message, UpdatedAt: time.Now()}
			if busy {
				mu.Unlock()
				return
			}
			busy = true
			mu.Unlock()
			// Called from a running handler, so its job holds w.tasks
			// above zero: Run waits for this write too.
			w.tasks.Add(1)
			go func() {
				defer w.tasks.Done()
				for {
					mu.Lock()
					p := next
					next, busy = nil, p != nil
					mu.Unlock()
					if p == nil {
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					if err := s.Progress(ctx, id, token, *p); err != nil {
						w.log.Debug("recording progress failed", "task", id, "err", err)
					}
					cancel()
				}
			}()
		}
	}
	return nil
}

package worker

import (
	"time"

	"github.com/ax-sched/ax/task"
)

// progressEvery is the least time between two heartbeats that carry a
// task's progress: a handler may report as often as it likes, the store
// sees at most one update a second per task.
const progressEvery = time.Second

// progressFunc is what Task.SetProgress calls for the task id: the
// Source's own (a Progressor batches it into its reports), else it is kept
// on the job as the newest progress and sent with the next heartbeat,
// which comes early for it (at most one a progressEvery).
func (w *Worker) progressFunc(id, token string) func(percent int, message string) {
	if s, ok := w.store.(Progressor); ok {
		return func(percent int, message string) { s.Progress(id, token, percent, message) }
	}
	return func(percent int, message string) {
		w.mu.Lock()
		if j := w.held[id]; j != nil && j.token == token && !j.done {
			// The store keeps the percent from going down; so does the
			// worker between two heartbeats.
			j.progressHi = max(j.progressHi, float64(percent))
			j.progress = &task.Progress{Percent: j.progressHi, Message: message}
		}
		w.mu.Unlock()
		select {
		case w.progressKick <- struct{}{}:
		default:
		}
	}
}

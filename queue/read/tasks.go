package read

import (
	"github.com/ax-sched/ax/queue"
)

// Tasks reads stored tasks (get, trail, list, scan, dead letters, events,
// counts, costs, run times, limit status) and carries out a user's actions
// on one (cancel, replay, priority).
type Tasks struct{ *queue.Engine }

// New returns the stage over e.
func New(e *queue.Engine) *Tasks { return &Tasks{Engine: e} }

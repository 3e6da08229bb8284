package maint

import (
	"github.com/ax-sched/ax/queue"
)

// Maintainer is the region leader's side, every write fenced: promotion,
// placement, reaping, the sweep, preemption, re-placement, the cold tier's
// promotion and the limits, fair shares, slow lanes and prices the leader
// publishes.
type Maintainer struct{ *queue.Engine }

// New returns the stage over e.
func New(e *queue.Engine) *Maintainer { return &Maintainer{Engine: e} }

package handoffs

import (
	"github.com/ax-sched/ax/queue"
)

// HandOffs holds the records of tasks crossing regions: the outbox of
// tasks sent away, the tasks held for their sender's word, and drains.
type HandOffs struct{ *queue.Engine }

// New returns the stage over e.
func New(e *queue.Engine) *HandOffs { return &HandOffs{Engine: e} }

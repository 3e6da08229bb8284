package submit

import (
	"github.com/ax-sched/ax/queue"
)

// Submitter accepts new tasks: the submit script, the cold tier's submit,
// the tenants' submit quotas and backlog room, and how full the region's
// Redis is (Memory).
type Submitter struct {
	*queue.Engine
	group *committer // small submits' group commit
}

// New returns the submitting stage over e.
func New(e *queue.Engine) *Submitter {
	return &Submitter{Engine: e, group: newCommitter(e.Shards())}
}

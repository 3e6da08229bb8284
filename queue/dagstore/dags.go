package dagstore

import (
	"github.com/ax-sched/ax/queue"
)

// DAGs stores DAG runs: their definitions, node states and indexes.
type DAGs struct{ *queue.Engine }

// New returns the stage over e.
func New(e *queue.Engine) *DAGs { return &DAGs{Engine: e} }

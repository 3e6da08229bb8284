package federation_test

import (
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/schedule"
)

// The interfaces other packages define for what they need of the
// federation, and those the API defines for them, checked here: package
// federation does not import them (see doc.go), so the checks cannot sit
// beside the methods.
var (
	_ schedule.Enqueuer    = (*federation.Node)(nil)
	_ dag.Tasks            = (*federation.Node)(nil)
	_ federation.Schedules = (*schedule.Scheduler)(nil)
	_ federation.DAGs      = (*dag.Runs)(nil)
)

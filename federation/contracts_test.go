package federation_test

import (
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/schedule"
)

// The interfaces that schedule, dag and httpapi define for what they need
// of each other, checked here, beside federation.Node's methods: none of
// those packages imports another of them (see each doc.go), so the checks
// cannot sit in them.
var (
	_ schedule.Enqueuer = (*federation.Node)(nil)
	_ dag.Tasks         = (*federation.Node)(nil)
	_ httpapi.Schedules = (*schedule.Scheduler)(nil)
	_ httpapi.DAGs      = (*dag.Runs)(nil)
)

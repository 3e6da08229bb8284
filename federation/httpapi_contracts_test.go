package federation_test

import (
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/httpapi/dags"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/httpapi/handoff"
	"github.com/ax-sched/ax/httpapi/schedules"
	"github.com/ax-sched/ax/httpapi/stream"
)

// The interfaces the HTTP API defines for what its endpoints need of the
// federation, checked beside federation.Node's methods (httpapi imports
// federation, so the checks cannot sit in federation itself).
var (
	_ httpapi.Submitter     = (*federation.Node)(nil)
	_ httpapi.TaskActions   = (*federation.Node)(nil)
	_ httpapi.Listings      = (*federation.Node)(nil)
	_ httpapi.Regions       = (*federation.Node)(nil)
	_ httpapi.Readiness     = (*federation.Node)(nil)
	_ endpoint.QuotaBuckets = (*federation.Node)(nil)
	_ stream.Federation     = (*federation.Node)(nil)
	_ handoff.Receiver      = (*federation.Node)(nil)
	_ handoff.Enqueuer      = (*federation.Node)(nil)
	_ dags.Federation       = (*federation.Node)(nil)
	_ schedules.Federation  = (*federation.Node)(nil)
)

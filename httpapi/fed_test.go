package httpapi_test

import (
	"testing"

	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/fedtest/fedapi"
)

// The harness's names, as this package's tests use them.

// fed is fedtest's federation, with this package's own helpers.
type fed struct{ *fedtest.Fed }

func newFed(t *testing.T, opts ...fedtest.Option) *fed { return &fed{fedapi.New(t, opts...)} }

type (
	regionEnv = fedtest.Region
	reply     = fedtest.Reply
	spec      = fedtest.Spec
)

const (
	aws, gcp, az               = fedtest.AWS, fedtest.GCP, fedtest.AZ
	poolCPU, poolSpot, poolGPU = fedtest.PoolCPU, fedtest.PoolSpot, fedtest.PoolGPU
	tokAcme, tokGlobex         = fedtest.TokAcme, fedtest.TokGlobex
	tokGlobexOps, tokOperator  = fedtest.TokGlobexOps, fedtest.TokOperator
	tokAdmin, tokCluster       = fedtest.TokAdmin, fedtest.TokCluster
	tokUnknown                 = fedtest.TokUnknown
	testTTL, testStale         = fedtest.TTL, fedtest.Stale
	testGrace, testPublish     = fedtest.Grace, fedtest.Publish
	testHeartbeat, workerBeat  = fedtest.Heartbeat, fedtest.WorkerBeat
	defaultQueCap              = fedtest.DefaultQueueCapacity
)

// x86 are the tags of the harness's CPU pools.
var x86 = map[string]string{"arch": "x86"}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

package federation

import (
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// What the HTTP API needs of this region's store, named here so that
// httpapi reaches the store only through the federation.

// Filter selects tasks for BulkCancel; empty fields match all.
type Filter = queue.Filter

// MaxTaskLimit is the largest page of Tasks (TaskQuery.Limit).
const MaxTaskLimit = queue.MaxList

// MaxCostDays is how many days a CostQuery may span: a day's cost records
// are kept that long.
const MaxCostDays = queue.MaxCostDays

// CostDay is the UTC day of t, as CostQuery's From and To count days.
func CostDay(t time.Time) time.Time { return queue.CostDay(t) }

var (
	// ErrDAGNotFound is a DAG run that does not exist (or that the caller
	// may not see).
	ErrDAGNotFound = queue.ErrDAGNotFound
	// ErrStoreUnavailable is a write too few of the store's replicas
	// acknowledged: a dependency outage, not a fault of the call.
	ErrStoreUnavailable = queue.ErrUnavailable
)

// Finished counts the region's tasks that ended SUCCEEDED and FAILED since
// its store began.
func (n *Node) Finished(ctx context.Context) (succeeded, failed int, err error) {
	c, err := n.store.Tasks().Counts(ctx)
	if err != nil {
		return 0, 0, err
	}
	return c.Succeeded, c.Failed, nil
}

// Events reads up to count of the region's events after the stream ids in
// after (one per shard; none: only new ones), blocking up to block for the
// first; it returns them and the ids to read on from.
func (n *Node) Events(ctx context.Context, after []string, count int, block time.Duration) ([]task.Event, []string, error) {
	return n.store.Tasks().Events(ctx, after, count, block)
}

// Ping reports whether the region's store answers.
func (n *Node) Ping(ctx context.Context) error { return n.store.Ping(ctx) }

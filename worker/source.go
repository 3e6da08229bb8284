package worker

import (
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/claim"
	"github.com/ax-sched/ax/task"
)

// Source is where a worker takes its tasks and records their outcomes:
// a region's store (its *claim.Claimer stage, a direct worker) or the API
// (Remote). A Source is safe for concurrent use.
type Source interface {
	Claims
	Outcomes
}

// Claims is the claiming half of a Source.
type Claims interface {
	// Options gives the lease (leases end unless renewed within it) and
	// the region, for spans.
	Options() queue.Options
	// ClaimTasks leases up to req.N READY tasks to req.Worker. A Source
	// without wake-ups (no NewWaker) may hold the call until a task comes
	// or a short wait ends.
	ClaimTasks(ctx context.Context, req queue.ClaimRequest) (queue.Claimed, error)
	// Heartbeat extends the leases held (recording the progress a lease
	// carries), records the worker alive with its slots and types, and
	// names the tasks whose handlers must stop.
	Heartbeat(ctx context.Context, worker, pool string, slots int, types queue.Types, held []queue.Lease) ([]queue.Stop, error)
}

// Outcomes is the recording half of a Source. Each call is applied at most
// once; queue.ErrLeaseLost (or task.ErrNotFound) says the task is no
// longer this worker's.
type Outcomes interface {
	Complete(ctx context.Context, cs ...queue.Completion) ([]error, error)
	Fail(ctx context.Context, f queue.Failure) (task.State, time.Time, error)
	Return(ctx context.Context, id, token, reason string, delay time.Duration) (task.State, error)
	RetryAfter(ctx context.Context, id, token string, d time.Duration) (task.State, error)
}

// waking is a Source whose claims answer at once: an idle claim loop
// blocks on its wake-ups instead (the direct store's markers).
type waking interface {
	NewWaker(pool string) *claim.Waker
}

// lookup is a Source that can read a task back: after a resent
// completion was refused, it tells whether the first send was recorded.
type lookup interface {
	Get(ctx context.Context, id string) (*task.Task, error)
}

// Session is a Source with a life of its own around Run: Open before the
// first claim, Close once every outcome was recorded and heartbeats
// stopped (Remote registers and leaves).
type Session interface {
	// Open tells what the worker serves: its id, pool, slots and types.
	Open(ctx context.Context, worker, pool string, slots int, types queue.Types) error
	Close(ctx context.Context) error
}

// Progressor is a Source that carries a handler's progress
// (Task.SetProgress) to the task its own way; any other Source gets it
// with the heartbeat (queue.Lease.Progress).
type Progressor interface {
	// Progress must not block: it queues the latest progress of a task.
	Progress(id, token string, percent int, message string)
}

// resultSizer is a Source that sends results in a form of its own and
// knows its server's limit (0: not known yet).
type resultSizer interface {
	ResultSize(result string) (size, limit int)
}

// beatPacer is a Source that says how often it wants heartbeats (the
// server's heartbeat_ms); the worker beats at the shorter of it and
// Options.Heartbeat.
type beatPacer interface {
	HeartbeatInterval() time.Duration
}

// waiter is an idle claim loop's wait for work.
type waiter interface {
	Wait(ctx context.Context, timeout time.Duration) (bool, error)
	Close()
}

// longPoll is the wait of a Source that waits within its claims: none.
type longPoll struct{}

func (longPoll) Wait(context.Context, time.Duration) (bool, error) { return false, nil }
func (longPoll) Close()                                            {}

var (
	_ Source = (*claim.Claimer)(nil)
	_ waking = (*claim.Claimer)(nil)
	_ lookup = (*claim.Claimer)(nil)
	_ waiter = (*claim.Waker)(nil)
)

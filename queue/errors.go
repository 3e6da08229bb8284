package queue

import "errors"

var (
	// ErrLeaseLost: the lease token is not the task's current one (the task
	// was reaped, cancelled, preempted or completed meanwhile).
	ErrLeaseLost = errors.New("queue: lease lost")
	// ErrFenced: a leader-only write carried a fencing token lower than one
	// already seen; the caller is no longer the leader and must resign.
	ErrFenced = errors.New("queue: fenced: a newer leader exists")
	// ErrUnavailable: Redis took a write but too few replicas acknowledged
	// it (Options.WaitReplicas): a dependency outage, not a fault of the
	// call. The refused submit may still have been stored: retry it with
	// its idempotency key, which finds the stored task.
	ErrUnavailable = errors.New("queue: redis unavailable")
	// ErrPoolFull: a submit with NewTask.AdmitMax found its pool holding
	// that many READY tasks already (authoritative admission): nothing
	// was stored; place the task elsewhere.
	ErrPoolFull = errors.New("queue: the pool's queue is at its admission limit")
	// ErrBacklogFull: a submit with NewTask.BacklogMax found its tenant
	// holding its share of that many unfinished tasks in the task's shard:
	// nothing was stored.
	ErrBacklogFull = errors.New("queue: the tenant's backlog is at its limit")
	// ErrBacklogBytesFull: a submit with NewTask.BacklogBytesMax found its
	// payload would take its tenant's unfinished tasks past their share of
	// that many payload bytes in the task's shard: nothing was stored.
	ErrBacklogBytesFull = errors.New("queue: the tenant's backlog bytes are at their limit")
)

// NotSent reports whether err says that a Redis call was refused before
// any of it was sent, so it did not run: an error in its chain has a
// method NotSent() bool that returns true (the ax server's Redis gate,
// while a master's probe hears nothing, refuses an API request's calls to
// it that way). An error that may have come after the command ran (a
// timeout, a cut connection, a call cut short by the gate) is not one:
// only a call that surely did not run may be made again elsewhere.
func NotSent(err error) bool {
	var ns interface{ NotSent() bool }
	return errors.As(err, &ns) && ns.NotSent()
}

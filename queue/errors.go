package queue

import "errors"

var (
	// ErrLeaseLost: the lease token is not the task's current one (the task
	// was reaped, cancelled, preempted or completed meanwhile).
	ErrLeaseLost = errors.New("queue: lease lost")
	// ErrFenced: a leader-only write carried a fencing token lower than one
	// already seen; the caller is no longer the leader and must resign.
	ErrFenced = errors.New("queue: fenced: a newer leader exists")
)

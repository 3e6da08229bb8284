package queue

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound: no task with this id in this region (or its record expired).
	ErrNotFound = errors.New("queue: task not found")
	// ErrBadID: the string is not a task id.
	ErrBadID = errors.New("queue: malformed task id")
	// ErrLeaseLost: the lease token is not the task's current one (the task
	// was reaped, cancelled, preempted or completed meanwhile).
	ErrLeaseLost = errors.New("queue: lease lost")
	// ErrIdempotencyConflict: the idempotency key is in use by a different spec.
	ErrIdempotencyConflict = errors.New("queue: idempotency key reused with a different spec")
	// ErrFenced: a leader-only write carried a fencing token lower than one
	// already seen; the caller is no longer the leader and must resign.
	ErrFenced = errors.New("queue: fenced: a newer leader exists")
	// ErrExists: a task with this id is already stored (hand-off receivers
	// accept an id once).
	ErrExists = errors.New("queue: task id already exists")
)

// TransitionError is returned when an operation is illegal in the task's
// current state. Nothing was changed.
type TransitionError struct {
	ID    string
	State State
	Op    string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("queue: cannot %s task %s in state %s", e.Op, e.ID, e.State)
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

package queue

import (
	"errors"
	"time"
)

// MaxOutboxRead is the most one Outbox call reads per shard.
const MaxOutboxRead = 4 * MaxBatch

// HandOffAnswer is a receiver's definite answer about one task in the
// outbox.
type HandOffAnswer struct {
	ID       string
	Accepted bool // false: refused; the task is placed again (canceled, when a cancel was requested)
	// Canceled: the receiver also carried out the cancel request the
	// hand-off carried (HandOff's Cancel).
	Canceled bool
	// Revoked: not the receiver's answer but the sender's own decision:
	// the target stayed unreachable past the horizon; placed again like a
	// refusal, with a HANDOFF_REVOKED step.
	Revoked bool
}

// ErrSendCancel answers an accepted hand-off that did not carry out a
// cancel requested meanwhile: the task stays in the outbox, due now, to be
// sent again with the cancel (the receiver answers the repeat as a
// duplicate and cancels it).
var ErrSendCancel = errors.New("queue: a cancel was requested during the hand-off: send it again with the cancel")

// OutboxRetry is the next attempt of one unanswered hand-off.
type OutboxRetry struct {
	ID string
	At time.Time
}

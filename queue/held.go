package queue

import (
	"time"
)

// HeldTask is a received hand-off waiting for its sender's word.
type HeldTask struct {
	ID   string
	From string    // the region that sent it
	At   time.Time // when it was received
}

// The sender's word on a hand-off, as HandOffWord gives it.
const (
	WordCommitted = "committed" // the record forwards to the target: it runs there
	WordRevoked   = "revoked"   // the record went on without the target: it must not run there
	WordPending   = "pending"   // in the outbox for the target, unanswered yet
	// WordUnknown: no record of the id here although none can have
	// expired yet (the task is younger than every retention): this
	// region lost it, and can no longer place it anywhere. A missing
	// record of an older task may have ended elsewhere and expired: that
	// is WordRevoked.
	WordUnknown = "unknown"
)

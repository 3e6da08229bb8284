package queue

import (
	"time"
)

// RunningTask is what preemption needs of a RUNNING task (Slots: milli-slots held).
type RunningTask struct {
	ID, Token, Pool, Worker string
	Priority, Slots         int
	Preemptible             bool
	PreemptCount            int
	StartedAt               time.Time
}

// WaitingHead is a pool's oldest READY task of a priority (Slots: milli-slots asked).
type WaitingHead struct {
	ID              string
	Priority, Slots int
	EnqueuedAt      time.Time
}

package queue

import (
	"time"
)

// RunningTask is what the preemption decision needs of a RUNNING task.
type RunningTask struct {
	ID, Token, Pool, Worker string
	Priority                int
	Preemptible             bool
	PreemptCount            int
	StartedAt               time.Time
}

// WaitingHead is the oldest READY task of a pool at one priority.
type WaitingHead struct {
	ID         string
	Priority   int
	EnqueuedAt time.Time
}

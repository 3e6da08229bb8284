package queue

import (
	"bytes"
	"time"

	"github.com/ax-sched/ax/task"
)

// MaxList is the largest page of List.
const MaxList = 1000

// ListQuery selects tasks of this region for an operator's listing (GET
// /v1/tasks); zero fields do not filter.
type ListQuery struct {
	State        task.State
	Type, Tenant string
	Pool         string
	LimitKey     string // tasks naming this concurrency limit key
	// Created bounds created_at: From ≤ created_at < To.
	CreatedFrom, CreatedTo time.Time
	// Payload is a byte substring of the payload's JSON (operators only:
	// the API checks who asks).
	Payload string
	// Before lists only ids that sort before it ("" from the newest).
	Before string
	Limit  int // 1..MaxList
}

// Matches reports whether t passes q's filters (Before and Limit aside).
func (q ListQuery) Matches(t *task.Task) bool {
	return (q.State == "" || t.State == q.State) && (q.Type == "" || t.Type == q.Type) &&
		(q.Tenant == "" || t.Tenant == q.Tenant) && (q.Pool == "" || t.Pool == q.Pool) &&
		(q.LimitKey == "" || t.LimitKey == q.LimitKey) &&
		(q.CreatedFrom.IsZero() || !t.CreatedAt.Before(q.CreatedFrom)) &&
		(q.CreatedTo.IsZero() || t.CreatedAt.Before(q.CreatedTo)) &&
		(q.Payload == "" || bytes.Contains(t.Payload, []byte(q.Payload)))
}

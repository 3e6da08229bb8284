package apiv1

import (
	"encoding/json"
	"time"
)

// MaxBatchMembers bounds the tasks of one POST /v1/batches.
const MaxBatchMembers = 10000

// BatchCreate is POST /v1/batches: tasks submitted as one batch, and the
// callbacks that run once every member has ended.
type BatchCreate struct {
	Name   string `json:"name,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Tasks are the members' specs (1 to MaxBatchMembers), submitted as
	// POST /v1/tasks/batch would in parts of MaxBatch; a member takes no
	// idempotency, unique or debounce key.
	Tasks []json.RawMessage `json:"tasks"`
	// OnComplete runs once when every member has ended (SUCCESS, FAILED
	// or CANCELED); OnSuccess once when every member SUCCEEDED. Each is a
	// task spec whose payload the callback's task receives inside a
	// BatchOutcome.
	OnComplete json.RawMessage `json:"on_complete,omitempty"`
	OnSuccess  json.RawMessage `json:"on_success,omitempty"`
	// IdempotencyKey (at most 256 characters) makes a retry create
	// nothing: the same key of the same tenant with the same request
	// answers 200 with the batch the first created (Duplicate), with
	// another request 409 naming idempotency_key, and while the first is
	// still creating it 503 with a Retry-After. Kept as long as a task's
	// idempotency key, in one region of the federation (any server
	// answers for it).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// BatchCounts are a batch's members by how they stand.
type BatchCounts struct {
	Total      int `json:"total"`
	Succeeded  int `json:"succeeded"`
	Failed     int `json:"failed"`
	Canceled   int `json:"canceled"`
	Unfinished int `json:"unfinished"`
}

// Batch states.
const (
	BatchRunning   = "RUNNING"
	BatchCompleted = "COMPLETED"
)

// Batch callback states (BatchStatus.Callback).
const (
	BatchCallbackNone    = "none"    // the batch has no callback
	BatchCallbackWaiting = "waiting" // members are still running
	BatchCallbackDue     = "due"     // complete; its callback task is being stored
	BatchCallbackSent    = "sent"    // its callback task is stored (OnCompleteID, OnSuccessID)
)

// BatchStatus answers GET /v1/batches/{id} (and the create: 201).
type BatchStatus struct {
	ID     string      `json:"id"`
	Name   string      `json:"name,omitempty"`
	Tenant string      `json:"tenant"`
	Region string      `json:"region"` // home region
	State  string      `json:"state"`  // RUNNING or COMPLETED
	Counts BatchCounts `json:"counts"`
	// Callback is the callbacks' state; OnCompleteID and OnSuccessID the
	// ids their tasks take (on_success's only when it runs).
	Callback        string     `json:"callback"`
	OnCompleteID    string     `json:"on_complete_id,omitempty"`
	OnSuccessID     string     `json:"on_success_id,omitempty"`
	CancelRequested bool       `json:"cancel_requested,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	CompletedAt     *time.Time `json:"completed_at,omitempty"`
	// Failed and Canceled are the ids of members that ended so (at most
	// MaxBatchIDs each; GET only).
	Failed   []string `json:"failed,omitempty"`
	Canceled []string `json:"canceled,omitempty"`
	// Rejected are the members the create refused (not part of the
	// batch), by their index in tasks (create only).
	Rejected []BatchRejected `json:"rejected,omitempty"`
	// Duplicate is true when the create's idempotency key answered with
	// the batch an earlier create stored (create only: 200, nothing new).
	Duplicate bool `json:"duplicate,omitempty"`
}

// MaxBatchIDs bounds the member ids a BatchStatus or BatchOutcome lists.
const MaxBatchIDs = 1000

// BatchRejected is one member a create refused.
type BatchRejected struct {
	Index  int    `json:"index"`
	Status int    `json:"status"`
	Error  *Error `json:"error"`
}

// BatchList answers GET /v1/batches: this region's batches, newest first.
type BatchList struct {
	Batches []BatchStatus `json:"batches"`
	// Next is the cursor of the next page ("" at the end).
	Next string `json:"next,omitempty"`
	// Regions are the regions asked with what each gave; Unavailable the
	// ones that did not answer (their batches are not listed).
	Regions     []RegionOutcome `json:"regions,omitempty"`
	Unavailable []string        `json:"unavailable,omitempty"`
}

// BatchOutcome is the payload of a batch's callback task.
type BatchOutcome struct {
	BatchID  string      `json:"batch_id"`
	Name     string      `json:"name,omitempty"`
	Callback string      `json:"callback"` // on_complete or on_success
	Counts   BatchCounts `json:"counts"`
	// Failed and Canceled are the ids of the members that ended so (at
	// most MaxBatchIDs each; Omitted counts those left out).
	Failed   []string `json:"failed"`
	Canceled []string `json:"canceled"`
	Omitted  int      `json:"omitted,omitempty"`
	// Payload is the callback spec's own payload.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// BatchEnds is POST /v1/internal/batches/ends: members' ends reported to
// their batch's home region by the region that ended them.
type BatchEnds struct {
	Ends []BatchEnd `json:"ends"`
}

// BatchEnd is one member's end: code S, F or C.
type BatchEnd struct {
	Batch  string `json:"batch"`
	Member string `json:"member"`
	Code   string `json:"code"`
}

// BatchEndsResponse answers BatchEnds.
type BatchEndsResponse struct {
	Applied int `json:"applied"`
}

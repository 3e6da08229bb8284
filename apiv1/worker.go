package apiv1

import (
	"encoding/json"
	"time"

	"github.com/ax-sched/ax/task"
)

// The remote worker protocol (docs/worker-protocol.md): a worker with a
// worker token registers, long-polls for tasks the server claims on its
// behalf, and reports heartbeats, progress and outcomes in batches.

// Limits of the worker protocol a server enforces whatever its
// configuration says.
const (
	// MaxWorkerSlots bounds WorkerRegister.Slots.
	MaxWorkerSlots = 1024
	// MaxWorkerClaim bounds WorkerClaimRequest.Max (and
	// WorkerRegistered.MaxClaim).
	MaxWorkerClaim = 256
	// MaxClaimID bounds WorkerClaimRequest.ClaimID (bytes).
	MaxClaimID = 64
	// MaxProgressMessage bounds WorkerProgress.Message (bytes).
	MaxProgressMessage = task.MaxProgressMessage
	// DefaultMaxResultBytes is a region's results.max_bytes unless its
	// configuration says otherwise.
	DefaultMaxResultBytes = task.DefaultMaxResultBytes
)

// Defaults of a region's remote_workers keys: a claim's longest wait, and
// the claims that may wait at once on one server and of one token.
const (
	DefaultWorkerMaxWait           = 30 * time.Second
	DefaultWorkerLongPolls         = 1024
	DefaultWorkerLongPollsPerToken = 256
)

// CodeResultTooLarge answers 413 a report whose outcome's result is over
// the region's results.max_bytes (field outcomes[i].result); nothing of
// the report is applied. A worker reports such an attempt as a failure
// with reason RESULT_TOO_LARGE instead.
const CodeResultTooLarge = "result_too_large"

// The stop reasons of WorkerStop.
const (
	StopCanceled  = "canceled"   // a user cancelled the task
	StopPreempted = "preempted"  // the leader took its slot for more urgent work
	StopLeaseLost = "lease_lost" // the lease expired or is no longer this worker's
	StopDeadline  = "deadline"   // the attempt ran past its timeout
)

// The statuses of WorkerOutcome.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
	OutcomeReturn  = "return"
)

// WorkerRegister is POST /v1/workers.
type WorkerRegister struct {
	// Pool is the pool the worker serves; the token must name it.
	Pool string `json:"pool"`
	// Types are the task types it runs (empty: every type the token
	// allows). A token that names types allows only a subset of them.
	Types []string `json:"types,omitempty"`
	// Slots is how many tasks it runs at once, 1..MaxWorkerSlots.
	Slots int `json:"slots"`
	// Labels describe the worker (zone, host); shown, never matched.
	Labels map[string]string `json:"labels,omitempty"`
	// Name is a human name for logs (optional).
	Name string `json:"name,omitempty"`
}

// WorkerRegistered answers POST /v1/workers (201).
type WorkerRegistered struct {
	WorkerID string `json:"worker_id"`
	Region   string `json:"region"`
	// LeaseMS is how long a claimed task stays the worker's without a
	// report naming it in held; the registration itself expires after
	// 2×LeaseMS without a claim or report.
	LeaseMS int `json:"lease_ms"`
	// HeartbeatMS is how often the worker should report at least.
	HeartbeatMS int `json:"heartbeat_ms"`
	// MaxWaitMS bounds WorkerClaimRequest.WaitMS.
	MaxWaitMS int `json:"max_wait_ms"`
	// MaxClaim bounds WorkerClaimRequest.Max.
	MaxClaim int `json:"max_claim"`
	// MaxResultBytes bounds the JSON text of one outcome's result.
	MaxResultBytes int `json:"max_result_bytes"`
}

// WorkerClaimRequest is POST /v1/workers/{worker_id}/claim.
type WorkerClaimRequest struct {
	// Max is how many tasks to take at most, 1..MaxClaim; the server also
	// bounds it by the worker's free slots.
	Max int `json:"max"`
	// WaitMS is how long to wait for a first task, 0..MaxWaitMS.
	WaitMS int `json:"wait_ms"`
	// ClaimID (optional, at most MaxClaimID bytes) names this claim: a
	// retry of it with the same id, after its answer was lost with a
	// connection or a server, answers the tasks the first try took
	// instead of taking others. A worker sends a new id with every claim
	// and the same id with every retry of one.
	ClaimID string `json:"claim_id,omitempty"`
}

// WorkerClaimResponse answers a claim (200): the tasks claimed, or none
// when the wait ended.
type WorkerClaimResponse struct {
	Tasks []WorkerTask `json:"tasks"`
}

// WorkerTask is one task handed to a remote worker.
type WorkerTask struct {
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	Payload    json.RawMessage   `json:"payload,omitempty"`
	Attempt    int               `json:"attempt"`
	MaxRetries int               `json:"max_retries"`
	Priority   int               `json:"priority"`
	Tags       map[string]string `json:"tags"`
	Tenant     string            `json:"tenant"`
	TraceID    string            `json:"trace_id"`
	// Lease is opaque: the worker sends it back with every report about
	// the task.
	Lease string `json:"lease"`
	// Deadline is when this attempt's timeout ends.
	Deadline time.Time `json:"deadline"`
	// Parents, for a DAG node, are its parents' results by parent node id
	// (those that succeeded and still kept one), each as ResultValue
	// gives it.
	Parents map[string]json.RawMessage `json:"parents,omitempty"`
	// Slots is the share of a worker slot the task holds while it runs
	// (task.Spec.Slots), when less than a whole one; absent: 1. The server
	// hands a worker tasks whose slots fit its registered slots together.
	Slots float64 `json:"slots,omitempty"`
}

// WorkerReport is POST /v1/workers/{worker_id}/report. Every list is
// optional; an empty report is a bare heartbeat.
type WorkerReport struct {
	// Held lists every task the worker still runs: their leases are
	// extended. A task not listed (and not in Outcomes) keeps its lease
	// only until it expires.
	Held     []WorkerLease    `json:"held,omitempty"`
	Progress []WorkerProgress `json:"progress,omitempty"`
	Outcomes []WorkerOutcome  `json:"outcomes,omitempty"`
	// Claim, when set, claims more tasks once the report is applied, in
	// the same round trip: the slots its outcomes free are counted free.
	// It never waits for a task (a claim's long-poll does); none ready,
	// the answer has no tasks.
	Claim *WorkerReportClaim `json:"claim,omitempty"`
}

// WorkerReportClaim is a report's claim: like a WorkerClaimRequest
// without the wait, and with the same claim_id contract (a resent report
// with the same claim_id answers the tasks the first one took).
type WorkerReportClaim struct {
	// Max is 1..MaxWorkerClaim, cut to the worker's free slots.
	Max     int    `json:"max"`
	ClaimID string `json:"claim_id,omitempty"`
}

// WorkerLease names a task the worker holds.
type WorkerLease struct {
	ID    string `json:"id"`
	Lease string `json:"lease"`
}

// WorkerProgress is how far a running task got, shown as the task's
// progress in GET /v1/tasks/{id}.
type WorkerProgress struct {
	ID    string `json:"id"`
	Lease string `json:"lease"`
	// Percent is 0..100.
	Percent float64 `json:"percent"`
	// Message is at most MaxProgressMessage bytes.
	Message string `json:"message,omitempty"`
}

// WorkerOutcome is how one attempt ended.
type WorkerOutcome struct {
	ID    string `json:"id"`
	Lease string `json:"lease"`
	// Status is success, failure or return.
	Status string `json:"status"`
	// Result (success) is any JSON, stored as its JSON text, at most
	// max_result_bytes of it; never truncated.
	Result json.RawMessage `json:"result,omitempty"`
	// Error (failure) is the error text.
	Error string `json:"error,omitempty"`
	// Retry (failure): false makes the failure final (dead letter);
	// absent or true retries while the task has retries left.
	Retry *bool `json:"retry,omitempty"`
	// Reason (failure) may be RESULT_TOO_LARGE: the handler's result was
	// over max_result_bytes; the failure is final and the task FAILED
	// with that reason.
	Reason string `json:"reason,omitempty"`
	// RetryAfterMS: on a return, how long the task waits before it is
	// READY again; on a retried failure, > 0 pauses the task's key for
	// that long instead of the task's backoff, and spends no retry (a
	// rate limit met downstream).
	RetryAfterMS int `json:"retry_after_ms,omitempty"`
}

// WorkerReportResponse answers a report (200).
type WorkerReportResponse struct {
	// Stop are the tasks whose handlers the worker must stop; the server
	// has already recorded how each ended.
	Stop []WorkerStop `json:"stop"`
	// Outcomes answer the report's outcomes, in their order.
	Outcomes []WorkerOutcomeResult `json:"outcomes"`
	// Tasks are what the report's claim took (none without a claim),
	// held by the worker from now on as a claim's are.
	Tasks []WorkerTask `json:"tasks,omitempty"`
}

// WorkerStop is a task to stop and why (Stop*).
type WorkerStop struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// WorkerOutcomeResult is whether one outcome was recorded: when not, Code
// says why (lease_lost: the task is no longer this worker's).
type WorkerOutcomeResult struct {
	ID      string `json:"id"`
	OK      bool   `json:"ok"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

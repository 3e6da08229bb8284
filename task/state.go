package task

// State is a task's place in the state machine (docs/architecture.md §3).
type State string

const (
	Pending   State = "PENDING"
	HandedOff State = "HANDED_OFF"
	Ready     State = "READY"
	Running   State = "RUNNING"
	Success   State = "SUCCESS"
	Failed    State = "FAILED"
	Canceled  State = "CANCELED"
	// Timeout is never a resting state: the reaper records it in the trail
	// and moves the task on to PENDING or FAILED in the same script.
	Timeout State = "TIMEOUT"
)

// Terminal reports whether no transition leaves s except replay (FAILED).
func (s State) Terminal() bool { return s == Success || s == Failed || s == Canceled }

// Reason codes recorded with transitions.
const (
	ReasonSubmitted  = "SUBMITTED"
	ReasonPlaced     = "PLACED"
	ReasonDue        = "DUE"
	ReasonNoCapacity = "NO_CAPACITY"
	// ReasonNoHandler: no pool the task may run in has a live worker serving its type
	// (none started yet, or the type is misspelt); it waits PENDING for one.
	ReasonNoHandler        = "NO_HANDLER"
	ReasonClaimed          = "CLAIMED"
	ReasonCompleted        = "COMPLETED"
	ReasonHandlerError     = "HANDLER_ERROR"
	ReasonRetryBackoff     = "RETRY_BACKOFF"
	ReasonNonRetryable     = "NON_RETRYABLE"
	ReasonRetriesExhausted = "RETRIES_EXHAUSTED"
	ReasonHeartbeatLost    = "HEARTBEAT_LOST"
	ReasonDeadline         = "DEADLINE_EXCEEDED"
	ReasonCanceledByUser   = "CANCELED_BY_USER"
	ReasonUpstreamFailed   = "UPSTREAM_FAILED"
	// ReasonDebounced: a newer submit of the task's debounce key replaced
	// it while it waited.
	ReasonDebounced      = "DEBOUNCED"
	ReasonPreempted      = "PREEMPTED"
	ReasonWorkerShutdown = "WORKER_SHUTDOWN"
	ReasonReplayed       = "REPLAYED"
	ReasonHandedOff      = "HANDED_OFF"
	// ReasonReceived: a region accepted a task handed to it; the step
	// follows the sender's HANDED_OFF step in the carried trail.
	ReasonReceived       = "RECEIVED"
	ReasonPriority       = "PRIORITY_CHANGED"
	ReasonHandOffRefused = "HANDOFF_REFUSED"
	// ReasonHandOffRevoked: the sender placed a task again after its target
	// stayed unreachable past the hand-off horizon; a copy the target may
	// hold is dropped there unrun (docs/architecture.md, hand-off).
	ReasonHandOffRevoked = "HANDOFF_REVOKED"
	// ReasonCommitted: a held hand-off was released by its sender's word.
	ReasonCommitted = "COMMITTED"
	ReasonDrained   = "DRAINED"
	// ReasonReplacedCost: the leader took a READY task out of a pool whose
	// price rose past the threshold or whose capacity window closed, to be
	// placed again.
	ReasonReplacedCost     = "REPLACED_COST"
	ReasonDeferred         = "DEFERRED_BACKPRESSURE"
	ReasonPreemptRequested = "PREEMPT_REQUESTED"
	// A READY task set aside by a limit of one of its keys (docs/limits.md):
	// once per parking episode, not per claim that finds it limited.
	ReasonRateLimited        = "RATE_LIMITED"
	ReasonConcurrencyLimited = "CONCURRENCY_LIMITED"
	// ReasonRetryAfter: the handler asked to be called again later
	// (worker.RetryAfter); the task's key is paused until then and the task
	// waits READY without spending a retry.
	ReasonRetryAfter = "RETRY_AFTER"
	// ReasonSlowLaneFull: a READY task of a slow type set aside while its
	// pool's slow lane is full (docs/fairness.md), once per parking.
	ReasonSlowLaneFull = "SLOW_LANE_FULL"
	// ReasonTenantRefused: a remote worker's claim took a task of a tenant
	// its token does not serve; the server gave it back unseen.
	ReasonTenantRefused = "TENANT_REFUSED"
	// ReasonResultTooLarge: the handler succeeded with a result over its
	// region's results.max_bytes; the attempt fails for good (the result
	// is never cut).
	ReasonResultTooLarge = "RESULT_TOO_LARGE"
	// ReasonMaxPauseExceeded: the handler asked to be called again later
	// (ReasonRetryAfter), but the pause would have taken the task's paused
	// time past its pause budget (Spec.MaxPause): the attempt fails
	// instead, retried by the task's policy; FAILED with this reason when
	// it was the last.
	ReasonMaxPauseExceeded = "MAX_PAUSE_EXCEEDED"
)

// Transition table (docs/architecture.md §3) as data. Every script moves a task only along
// these edges; the model test checks every trail entry against it.
var transitions = map[State]map[State][]string{
	"": {
		Pending: {ReasonSubmitted},
		Ready:   {ReasonPlaced},
	},
	Pending: {
		Pending:   {ReasonNoCapacity, ReasonNoHandler, ReasonPriority, ReasonHandOffRefused, ReasonHandOffRevoked, ReasonDeferred},
		HandedOff: {ReasonHandedOff},
		Ready:     {ReasonDue, ReasonPlaced, ReasonCommitted},
		Canceled:  {ReasonCanceledByUser, ReasonUpstreamFailed, ReasonDebounced},
	},
	Ready: {
		Ready:    {ReasonPriority, ReasonRateLimited, ReasonConcurrencyLimited, ReasonRetryAfter, ReasonSlowLaneFull},
		Pending:  {ReasonDrained, ReasonReplacedCost},
		Running:  {ReasonClaimed},
		Canceled: {ReasonCanceledByUser, ReasonUpstreamFailed},
	},
	Running: {
		Running:  {ReasonPriority, ReasonPreemptRequested},
		Success:  {ReasonCompleted},
		Pending:  {ReasonHandlerError, ReasonDeadline, ReasonPreempted, ReasonWorkerShutdown, ReasonTenantRefused, ReasonMaxPauseExceeded},
		Ready:    {ReasonPreempted, ReasonWorkerShutdown, ReasonRetryAfter, ReasonTenantRefused},
		Timeout:  {ReasonHeartbeatLost, ReasonDeadline},
		Failed:   {ReasonRetriesExhausted, ReasonNonRetryable, ReasonResultTooLarge, ReasonMaxPauseExceeded},
		Canceled: {ReasonCanceledByUser},
	},
	Timeout: {
		Pending:  {ReasonHeartbeatLost, ReasonDeadline},
		Failed:   {ReasonRetriesExhausted},
		Canceled: {ReasonCanceledByUser},
	},
	Failed: {
		Pending: {ReasonReplayed},
	},
	// In the receiving region, a handed-off task goes on from its sender's
	// HANDED_OFF step.
	HandedOff: {
		Ready:   {ReasonReceived},
		Pending: {ReasonReceived},
	},
}

// Legal reports whether from→to with reason is an edge of the state machine.
func Legal(from, to State, reason string) bool {
	for _, r := range transitions[from][to] {
		if r == reason {
			return true
		}
	}
	return false
}

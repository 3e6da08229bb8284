package apiv1

import (
	"encoding/json"
	"time"

	"github.com/ax-sched/ax/task"
)

// Error is the one error shape: {"error":{"code","message","field"}}.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Explanation is set on 422 (unplaceable): why every pool was rejected.
	Explanation *Explanation `json:"explanation,omitempty"`
	// RetryAfterSeconds mirrors the Retry-After header on 429 and 503.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}

// Error makes an Error a Go error too, for the packages the HTTP API serves
// through interfaces rather than imports (schedule): they return the
// errors a caller sees as *Error, and the API maps Code to its HTTP status
// in its one mapping.
func (e *Error) Error() string { return e.Message }

// HeaderForwarded is the header of server-to-server calls that counts the
// servers a request passed through: a forwarded request is never routed
// again.
const HeaderForwarded = "X-Ax-Forwarded"

// MaxBatch bounds the tasks of one POST /v1/tasks/batch and the hand-offs
// of one POST /v1/internal/handoff/batch.
const MaxBatch = 1000

// DefaultBatchMaxBytes bounds the body of one POST /v1/tasks/batch unless
// the region's quotas.batch.max_bytes says otherwise.
const DefaultBatchMaxBytes = 16 << 20

// ErrorBody wraps Error.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error codes. Each maps to one HTTP status in the server's one mapping.
const (
	CodeInvalid          = "invalid_argument"    // 400
	CodeUnauthorized     = "unauthenticated"     // 401
	CodeForbidden        = "permission_denied"   // 403
	CodeNotFound         = "not_found"           // 404
	CodeConflict         = "conflict"            // 409 (idempotency key reused, illegal transition)
	CodeTooLarge         = "payload_too_large"   // 413
	CodeHeadersTooLarge  = "headers_too_large"   // 431 (request line and headers over http_server.max_header_bytes)
	CodeUnplaceable      = "unplaceable"         // 422
	CodeSaturated        = "saturated"           // 429
	CodeQuotaExceeded    = "quota_exceeded"      // 429 (the tenant's submit rate)
	CodeBudgetExceeded   = "budget_exceeded"     // 429 (the tenant's monthly budget, over_budget: refuse)
	CodeTokenExpired     = "token_expired"       // 401 (the token's expires_at passed)
	CodeUnavailable      = "unavailable"         // 503
	CodeBadGateway       = "bad_gateway"         // 502 (another region's server gave an unusable answer)
	CodeInternal         = "internal"            // 500
	CodeFailedPrecond    = "failed_precondition" // 409 (state does not allow the operation)
	CodeMethodNotAllowed = "method_not_allowed"  // 405 (the path exists; the Allow header names its methods)
)

// SubmitResponse answers POST /v1/tasks (201, or 200 for an idempotent repeat).
type SubmitResponse struct {
	ID        string     `json:"id"`
	State     task.State `json:"state"`
	Region    string     `json:"region"`
	Pool      *string    `json:"pool"` // null while unplaced
	Duplicate bool       `json:"duplicate,omitempty"`
}

// BatchRequest is POST /v1/tasks/batch.
type BatchRequest struct {
	Tasks []json.RawMessage `json:"tasks"`
}

// BatchItem is one result of a batch: either the response or an error.
type BatchItem struct {
	Status int             `json:"status"`
	Task   *SubmitResponse `json:"task,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// BatchResponse answers POST /v1/tasks/batch (200; per-item statuses).
type BatchResponse struct {
	Results  []BatchItem `json:"results"`
	Accepted int         `json:"accepted"`
	Rejected int         `json:"rejected"`
}

// TrailResponse answers GET /v1/tasks/{id}/trail.
type TrailResponse struct {
	ID          string            `json:"id"`
	Transitions []task.Transition `json:"transitions"`
}

// CancelResponse answers POST /v1/tasks/{id}/cancel.
type CancelResponse struct {
	ID    string     `json:"id"`
	State task.State `json:"state"` // CANCELED, or RUNNING/PENDING when the cancel is a request
	// Requested is true when the task was RUNNING (the worker stops it at
	// its next heartbeat) or PENDING with its hand-off to another region in
	// flight (the hand-off carries the cancel there; a refusal cancels it
	// here).
	Requested bool `json:"requested,omitempty"`
}

// PriorityRequest is POST /v1/tasks/{id}/priority.
type PriorityRequest struct {
	Priority *int `json:"priority"`
}

// BulkCancelRequest is POST /v1/tasks/cancel: a filter of at least one of
// type, state, tenant. The server that receives it cancels in every region
// of the federation; Region limits it to one (the request is routed there).
type BulkCancelRequest struct {
	Type   string     `json:"type,omitempty"`
	State  task.State `json:"state,omitempty"` // PENDING or READY
	Tenant string     `json:"tenant,omitempty"`
	Region string     `json:"region,omitempty"` // only this region; "" every region
}

// BulkCancelResponse counts what a bulk cancel did: the sum, and each
// region's part. The answer is 200 as long as one region answered: a region
// that did not is named in Unavailable (it may have cancelled some of its
// tasks before it failed; a bulk cancel can be repeated safely).
type BulkCancelResponse struct {
	Canceled    int             `json:"canceled"`
	Regions     []RegionOutcome `json:"regions,omitempty"`
	Unavailable []string        `json:"unavailable"`
}

// TaskList answers GET /v1/dlq?type=&tenant=&region=&limit=&cursor=&offset=:
// the dead letters of every region (or of region=), newest first (by
// failure time, then id). Each task's held_by is the region that holds it.
// The answer is 200 as long as one region answered: a region that did not
// is named in Unavailable and its dead letters are missing from the page.
type TaskList struct {
	Tasks []*task.Task `json:"tasks"`
	// NextCursor continues the listing after the last task of this page:
	// pass it back as cursor= with the same filters. Empty when the regions
	// that answered have nothing more. It is opaque; it marks a place in
	// the merged order (a failure time and an id), not a position, so dead
	// letters that arrive or leave meanwhile do not shift the pages.
	NextCursor  string          `json:"next_cursor,omitempty"`
	Regions     []RegionOutcome `json:"regions,omitempty"`
	Unavailable []string        `json:"unavailable"`
}

// RegionOutcome is one region's part of an answer gathered from every
// region (GET /v1/dlq, POST /v1/tasks/cancel).
type RegionOutcome struct {
	Region string `json:"region"`
	// Count is what the region contributed: the dead letters of this page
	// that it holds, or the tasks it cancelled.
	Count int `json:"count"`
	// Error says why the region did not answer; it is then also listed in
	// the answer's Unavailable.
	Error *Error `json:"error,omitempty"`
}

// PoolStatus is one pool as published by its region's leader.
type PoolStatus struct {
	Name string            `json:"name"`
	Tags map[string]string `json:"tags"`
	// Slots is what the pool runs at once now: its live workers' slots,
	// or with a capacity window the slots the window lends now (at most
	// the live workers', 0 while every window is closed). Utilisation is
	// RunningSlots ÷ Slots.
	Slots int `json:"slots"`
	// WorkerSlots is the live workers' slots of a pool with a capacity
	// window (omitted without one: Slots says it).
	WorkerSlots int `json:"worker_slots,omitempty"`
	Workers     int `json:"workers"`
	Running     int `json:"running"`
	// RunningSlots is the slot units the RUNNING tasks hold (a task of
	// slots 0.25 a quarter, any other one): four quarter tasks fill 1.
	RunningSlots float64 `json:"running_slots"`
	Ready        int     `json:"ready"`
	// Parked: READY tasks set aside by a limit or a full slow lane
	// (counted in Ready).
	Parked           int     `json:"parked,omitempty"`
	QueueCapacity    int     `json:"queue_capacity"`
	Utilisation      float64 `json:"utilisation"`
	QueueFill        float64 `json:"queue_fill"`
	PricePerSlotHour float64 `json:"price_per_slot_hour"`
	Spot             bool    `json:"spot"`
	Discount         float64 `json:"discount,omitempty"`
	Paused           bool    `json:"paused,omitempty"`
	// CapacityWindow is set for a pool with a capacity schedule.
	CapacityWindow *CapacityWindow `json:"capacity_window,omitempty"`
	// RefusedPerMinute is the submits the answering server refused per
	// minute lately as saturated (429) while this pool was saturated for
	// them: the pool's backpressure as that server meets it (any region's
	// pool), counted over the last minute (since the server started, when
	// it is younger).
	RefusedPerMinute *float64 `json:"refused_per_minute,omitempty"`
	// Starving is how many of the pool's READY tasks have waited longer
	// than its region's starvation_threshold, as its leader last counted.
	Starving int `json:"starving"`
	// WaitP99Seconds is the 99th percentile of the pool's ready→start
	// waits over the last minute, from a sample of its region's claims, as
	// its leader last published it; omitted: too few claims to say.
	WaitP99Seconds *float64 `json:"wait_p99_seconds,omitempty"`
}

// CapacityWindow is where a pool with a capacity schedule stands now:
// open inside a window with slots (Slots of them; outside every window it
// has none), and when the next window starts or ends.
type CapacityWindow struct {
	Open       bool       `json:"open"`
	Slots      int        `json:"slots"`
	Window     string     `json:"window,omitempty"` // "HH:MM–HH:MM" it is in now
	Timezone   string     `json:"timezone"`
	NextChange *time.Time `json:"next_change,omitempty"`
}

// RegionStatus is one region in GET /v1/regions.
type RegionStatus struct {
	Name string `json:"name"`
	// Provider says where the region runs (aws, gcp, azure, other), as
	// its region file says; empty from a server of an older ax.
	Provider  string    `json:"provider,omitempty"`
	API       string    `json:"api"`
	Leader    string    `json:"leader"`
	Healthy   bool      `json:"healthy"`
	Stale     bool      `json:"stale,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Servers is how many of the region's servers are announced in the
	// global etcd (placement shares pool headroom among all of them).
	Servers int          `json:"servers"`
	Pools   []PoolStatus `json:"pools"`
	// RefusedPerMinute, on the answering server's own region only, is the
	// submits that server refused per minute lately, by reason (saturated,
	// unplaceable, backlog), counted like PoolStatus.RefusedPerMinute.
	RefusedPerMinute map[string]float64 `json:"refused_per_minute,omitempty"`
}

// RegionsResponse answers GET /v1/regions.
type RegionsResponse struct {
	Regions []RegionStatus `json:"regions"`
	// GlobalView is false when this server cannot reach the global etcd and
	// answers from its last known view.
	GlobalView bool `json:"global_view"`
}

// HistoryResponse answers GET /v1/history: the answering server's samples
// of the last hour (since it started), oldest first, one every
// EverySeconds. Tenant is the tenant the tenant figures are of ("": every
// tenant).
type HistoryResponse struct {
	EverySeconds int             `json:"every_seconds"`
	Tenant       string          `json:"tenant,omitempty"`
	Samples      []HistorySample `json:"samples"`
}

// HistorySample is one look of the answering server. The counts are
// cumulative: a chart draws their rate between samples.
type HistorySample struct {
	At time.Time `json:"at"`
	// Regions is every region's queue depth as the global view had it.
	Regions []HistoryRegion `json:"regions"`
	// Succeeded and Failed are the answering server's region's tasks that
	// ended so since its store began; absent when its Redis did not answer.
	Succeeded *int `json:"succeeded,omitempty"`
	Failed    *int `json:"failed,omitempty"`
	// Submitted is the submits this server accepted since it started.
	Submitted float64 `json:"submitted"`
	// SpendUSD is today's (UTC) spend in the regions that answered; absent
	// when it could not be read.
	SpendUSD *float64 `json:"spend_usd,omitempty"`
}

// HistoryRegion is one region's pools summed: READY and RUNNING tasks and
// slots; Pools are each pool's fill.
type HistoryRegion struct {
	Name    string        `json:"name"`
	Ready   int           `json:"ready"`
	Running int           `json:"running"`
	Slots   int           `json:"slots"`
	Pools   []HistoryPool `json:"pools"`
}

// HistoryPool is one pool as its region's leader last published it:
// QueueFill is READY ÷ queue capacity, Utilisation RUNNING ÷ slots (0..1).
type HistoryPool struct {
	Name        string  `json:"name"`
	QueueFill   float64 `json:"queue_fill"`
	Utilisation float64 `json:"utilisation"`
	// WaitP99Seconds: as PoolStatus's (omitted: too few claims to say).
	WaitP99Seconds *float64 `json:"wait_p99_seconds,omitempty"`
}

// DrainResponse answers POST /v1/regions/{region}/drain.
type DrainResponse struct {
	Region string `json:"region"`
	Moved  int    `json:"moved"`
}

// Candidate is one pool in a placement explanation.
type Candidate struct {
	Region           string  `json:"region"`
	Pool             string  `json:"pool"`
	Rejected         string  `json:"rejected,omitempty"` // reason code, empty when eligible
	Detail           string  `json:"detail,omitempty"`
	PricePerSlotHour float64 `json:"price_per_slot_hour"`
	ExpectedSeconds  float64 `json:"expected_seconds"`
	BaseCost         float64 `json:"base_cost"`
	Penalty          float64 `json:"watermark_penalty"`
	CrossRegion      float64 `json:"cross_region_penalty"`
	Score            float64 `json:"score"`
	QueueFill        float64 `json:"queue_fill"`
	Chosen           bool    `json:"chosen,omitempty"`
	// EstimateSource says where ExpectedSeconds came from: "learnt" (the
	// pool's own completions), "type_other_pools" (the type's estimate in
	// the other pools, weighted by their observations) or "default".
	// Observations are the runs behind it; SpreadSeconds their standard
	// deviation (learnt only).
	EstimateSource string  `json:"estimate_source,omitempty"`
	Observations   int64   `json:"observations"`
	SpreadSeconds  float64 `json:"spread_seconds,omitempty"`
	// ExpectedWaitSeconds is how long the task would wait for a slot here:
	// TasksAhead (queued + this server's recent placements − free slots;
	// < 0: a slot is free) ÷ DrainPerSecond, a measured rate
	// (WaitSource "measured_drain"), else slots ÷ ExpectedSeconds ("slots");
	// "free_slot" when it waits for nothing. WaitTargetSeconds is the
	// target that applied (0: none); OverWaitTarget: the wait is past it.
	ExpectedWaitSeconds float64 `json:"expected_wait_seconds"`
	TasksAhead          int64   `json:"tasks_ahead"`
	DrainPerSecond      float64 `json:"drain_per_second"`
	WaitSource          string  `json:"wait_source,omitempty"`
	WaitTargetSeconds   float64 `json:"wait_target_seconds,omitempty"`
	OverWaitTarget      bool    `json:"over_wait_target,omitempty"`
}

// Explanation answers POST /v1/placement/explain and accompanies 422s.
type Explanation struct {
	Chosen     *Candidate  `json:"chosen,omitempty"`
	Candidates []Candidate `json:"candidates"`
	Outcome    string      `json:"outcome"` // PLACED, NO_CAPACITY, SATURATED, UNPLACEABLE
	// Rule is how cost and expected wait were traded: "cheapest" (no
	// target), "cheapest_within_wait", or "least_wait" (every eligible
	// pool's wait was past its target).
	Rule string `json:"rule,omitempty"`
}

// HandOff is POST /v1/internal/handoff: a task accepted in its home region
// and placed in the receiver's pool. The receiver accepts an id at most once.
type HandOff struct {
	ID   string          `json:"id"`
	Pool string          `json:"pool"`
	Spec json.RawMessage `json:"spec"`
	// Cancel: a cancel was requested at home while the hand-off was in
	// flight; the receiver accepts the task and cancels it (also when it
	// holds the id already), and says so in Canceled.
	Cancel bool `json:"cancel,omitempty"`
	// What the task brings from the sender, so the receiver goes on from
	// it instead of starting over: attempts so far (its retry budget),
	// preemptions, creation time, last error, and its trail (each step
	// naming its region). Absent from older senders.
	Attempts     int               `json:"attempts,omitempty"`
	PreemptCount int               `json:"preempt_count,omitempty"`
	CreatedAt    *time.Time        `json:"created_at,omitempty"`
	LastError    string            `json:"last_error,omitempty"`
	Trail        []task.Transition `json:"trail,omitempty"`
	// From is the sending region. The receiver holds the task PENDING and
	// unclaimable until that region's word (HandOffCommit, or its answer
	// to a HandOffStatus): the sender's record is the one place that
	// decides whether the task runs here or elsewhere. Absent: the
	// receiver runs it at once (a sender from before the commit).
	From string `json:"from,omitempty"`
	// Traceparent names the sender's hand-off span of this task (W3C
	// traceparent) in a batch request, whose own header can name only one
	// trace's span; the receipt's span is its child.
	Traceparent string `json:"traceparent,omitempty"`
	// Budget is the reservation the task holds on its tenant's budget
	// ledger at the sender ("<UTC month> <usd>"): the receiver takes it
	// off its own ledger as the task ends, beside the actual cost it
	// books. Absent: none.
	Budget string `json:"budget,omitempty"`
}

// HandOffResponse is the receiver's definite answer.
type HandOffResponse struct {
	Accepted bool   `json:"accepted"`
	State    string `json:"state,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Field    string `json:"field,omitempty"`    // refused: the field at fault (pool, max_backlog)
	Canceled bool   `json:"canceled,omitempty"` // the item's Cancel was carried out
}

// EventsResponse answers GET /v1/events?region=R&after=CURSOR&wait=10s, a
// long poll over a region's event stream (one entry per script call).
// Pass Next back as `after` to continue; an empty `after` starts at new
// events only.
type EventsResponse struct {
	Region string       `json:"region"`
	Events []task.Event `json:"events"`
	Next   string       `json:"next"`
}

// ---------------------------------------------------------------------------
// Added with package client (the Go client and the CLI). New types only.
// ---------------------------------------------------------------------------

// TaskUpdate answers POST /v1/tasks/{id}/replay and /v1/tasks/{id}/priority:
// the task's id, state and priority after the action. Its fields are a
// subset of task.Task's, so a server that answers with the whole task is
// read the same way.
type TaskUpdate struct {
	ID       string     `json:"id"`
	State    task.State `json:"state"`
	Priority *int       `json:"priority,omitempty"`
}

// StreamTicket answers POST /v1/stream/tickets: pass Ticket as
// GET /v1/stream?ticket=… (once, before ExpiresAt) where a bearer header
// cannot be sent (a browser's EventSource).
type StreamTicket struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

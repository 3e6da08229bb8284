package task

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Task is a task as stored: its spec and its state.
type Task struct {
	ID             string            `json:"id"`
	Type           string            `json:"type"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
	Priority       int               `json:"priority"`
	Tags           map[string]string `json:"tags,omitempty"`
	Regions        []string          `json:"regions,omitempty"`
	Timeout        Duration          `json:"timeout"`
	MaxRetries     int               `json:"max_retries"`
	RetryBase      Duration          `json:"retry_base"`
	RetryCap       Duration          `json:"retry_cap"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Preemptible    bool              `json:"preemptible,omitempty"`
	Critical       bool              `json:"critical,omitempty"`
	Tenant         string            `json:"tenant"`
	TraceID        string            `json:"trace_id"`
	LimitKey       string            `json:"limit_key,omitempty"`
	// MaxPricePerSlotHour is the spec's price cap (0: none).
	MaxPricePerSlotHour float64 `json:"max_price_per_slot_hour,omitempty"`
	// MaxWait is the spec's own wait target (0: none).
	MaxWait Duration `json:"max_wait,omitempty"`
	// MaxPause is the spec's pause budget (0: the region's retry.max_pause).
	MaxPause Duration `json:"max_pause,omitempty"`
	// Paused is how long its handler's retry-after answers have made it
	// wait in all, counted against its pause budget.
	Paused Duration `json:"paused,omitempty"`
	// Slots is the spec's share of a worker slot (0: a whole slot).
	Slots Slots `json:"slots,omitempty"`
	// ResultTTL is the spec's result_ttl (0: the region's retention).
	ResultTTL Duration `json:"result_ttl,omitempty"`
	// UniqueKey and DebounceKey are the spec's unique_key and
	// debounce_key (docs/tasks.md): the key it was submitted under.
	UniqueKey   string `json:"unique_key,omitempty"`
	DebounceKey string `json:"debounce_key,omitempty"`
	// Parents are a DAG node's parents' results (Spec.Parents), for its
	// handler; not shown by the API (read the parents' tasks).
	Parents ParentResults `json:"-"`
	// Batch is the batch the task is a member of (Spec.Batch; "" none).
	Batch string `json:"batch,omitempty"`
	// ScheduleEnd is Spec.ScheduleEnd; not shown by the API.
	ScheduleEnd     string `json:"-"`
	State           State  `json:"state"`
	Reason          string `json:"reason,omitempty"`
	Region          string `json:"region"`  // home region (from the id)
	HeldBy          string `json:"held_by"` // region whose store holds this record
	Pool            string `json:"pool,omitempty"`
	Pinned          bool   `json:"pinned,omitempty"`
	Worker          string `json:"worker,omitempty"`
	Attempts        int    `json:"attempts"`
	PreemptCount    int    `json:"preempt_count,omitempty"`
	CancelRequested bool   `json:"cancel_requested,omitempty"`
	HandedOffTo     string `json:"handed_off_to,omitempty"`
	HandOffTarget   string `json:"handoff_target,omitempty"` // in the outbox, bound for this region
	// BudgetHold is the reservation the task holds on its tenant's budget
	// ledger ("<UTC month> <usd>", queue.NewTask.Budget): a hand-off
	// carries it to the receiver. Not part of the API.
	BudgetHold string `json:"-"`
	LastError  string `json:"last_error,omitempty"`
	// Result is the text a successful attempt gave back (a remote
	// worker's: JSON text), at most its region's results.max_bytes.
	// A Result that is not UTF-8 text travels as ResultBase64 in JSON
	// (MarshalJSON), so a read through another region keeps its bytes.
	Result string `json:"result,omitempty"`
	// ResultExpiresAt is when a SUCCESS record (and its result) becomes
	// due for removal: finished_at + result_ttl; the region's sweep
	// removes it within two minutes after.
	ResultExpiresAt *time.Time `json:"result_expires_at,omitempty"`
	// Progress is the last progress reported for the task's latest
	// attempt (nil: none yet). A new attempt starts at 0 (Attempt says
	// which attempt it is of).
	Progress     *Progress  `json:"progress,omitempty"`
	PricePerHour float64    `json:"price_per_slot_hour,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	DueAt        *time.Time `json:"due_at,omitempty"`
	EnqueuedAt   *time.Time `json:"enqueued_at,omitempty"`
	ReadyAt      *time.Time `json:"ready_at,omitempty"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	LeaseToken   string     `json:"-"`
}

// Progress is how far a running attempt got, as its worker said.
type Progress struct {
	Percent float64 `json:"percent"`
	Message string  `json:"message,omitempty"`
	// Attempt is the attempt the progress is of (0: not said).
	Attempt   int       `json:"attempt,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Transition is one entry of a task's trail.
type Transition struct {
	At      time.Time `json:"ts"`
	From    State     `json:"from,omitempty"`
	To      State     `json:"to"`
	Reason  string    `json:"reason"`
	By      string    `json:"by,omitempty"`
	Attempt int       `json:"attempt"`
	Error   string    `json:"error,omitempty"`
	// Region is the region whose store recorded the step: a task handed
	// from region to region carries its trail, so one trail tells its
	// whole history.
	Region string `json:"region,omitempty"`
}

// Event is one entry of the region's event stream: one script call.
type Event struct {
	ID    string   `json:"id"` // stream entry id, to resume from
	Shard int      `json:"shard"`
	Op    string   `json:"op"`    // submit, promote, place, claim, complete, retry, dead, reap, cancel, replay, return
	N     int      `json:"n"`     // tasks concerned
	Tasks []string `json:"tasks"` // up to 8 of their ids
}

// Spec rebuilds the submittable spec of a stored task (hand-off sends it).
func (t *Task) Spec() *Spec {
	p, mr := t.Priority, t.MaxRetries
	sp := &Spec{
		Type: t.Type, Payload: t.Payload, Priority: &p, Tags: t.Tags, Regions: t.Regions,
		Timeout: t.Timeout, MaxRetries: &mr, RetryBase: t.RetryBase, RetryCap: t.RetryCap,
		Preemptible: t.Preemptible, Critical: t.Critical, Tenant: t.Tenant, TraceID: t.TraceID,
		LimitKey: t.LimitKey, MaxPricePerSlotHour: t.MaxPricePerSlotHour, MaxWait: t.MaxWait,
		MaxPause: t.MaxPause, ResultTTL: t.ResultTTL, Parents: t.Parents, Batch: t.Batch, Slots: t.Slots,
		ScheduleEnd: t.ScheduleEnd,
	}
	// The key was settled at home; the receiver of a hand-off shows it and
	// takes none (a task with an id takes no key).
	sp.UniqueKey = t.UniqueKey
	return sp
}

// taskJSON is Task's JSON form, with the bytes of a result that is not
// UTF-8 text in result_base64 (then result is absent).
type taskJSON struct {
	*taskAlias
	ResultBase64 []byte `json:"result_base64,omitempty"`
}

type taskAlias Task

// MarshalJSON writes t, a Result that is not UTF-8 text as result_base64.
func (t Task) MarshalJSON() ([]byte, error) {
	a := taskAlias(t)
	j := taskJSON{taskAlias: &a}
	if !utf8.ValidString(t.Result) {
		j.ResultBase64, a.Result = []byte(t.Result), ""
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *Task) UnmarshalJSON(b []byte) error {
	j := taskJSON{taskAlias: (*taskAlias)(t)}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.ResultBase64 != nil {
		t.Result = string(j.ResultBase64)
	}
	return nil
}

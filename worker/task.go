package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ax-sched/ax/task"
)

// Handler runs one attempt of a task. It must return when ctx is done: ctx
// carries the task's deadline (its timeout from claim) and is cancelled with
// a cause (context.Cause) when the task must stop — ErrLeaseLost,
// ErrCanceled, ErrPreempted, ErrDeadline or ErrShutdown.
//
// When it returns, the task is settled by the first rule that holds:
//
//   - lease lost: nothing is recorded; someone else owns the task now.
//   - it returned nil: SUCCESS with the text given to SetResult. A handler
//     that finished its work is believed even if a stop arrived meanwhile.
//     Successes are acknowledged in batches (up to 32, or after 2ms, or at
//     once when a claim waits for them).
//   - stopped by the worker's shutdown: given back (READY, no retry spent).
//   - preempted: given back with a jittered 60–120s delay (no retry spent).
//   - cancel requested: acknowledged as a failed attempt, which the store
//     turns into CANCELED.
//   - deadline passed: failed with reason DEADLINE_EXCEEDED (retryable).
//   - the error is NonRetryable (errors.Is(err, ErrNonRetryable)): FAILED,
//     NON_RETRYABLE.
//   - the error is a RetryAfter(d, err) (errors.As finds a *RetryAfterError):
//     the tenant's tasks of the task's limit key, or its type, are paused
//     until now + d for every worker of the region, and the task waits READY
//     (RETRY_AFTER in its trail) without spending a retry.
//   - any other error, or a panic (its value and the top of its stack become
//     the error text): failed with retry and backoff while retries are left.
//
// Result text is bounded to task.MaxResultLen bytes, error text to
// task.MaxErrorLen. An acknowledgement is retried until it is recorded or
// the lease is known to be lost.
type Handler func(ctx context.Context, t *Task) error

// Task is what a handler sees of the task it runs. The fields are copies:
// changing them changes nothing in the store.
type Task struct {
	ID         string
	Type       string
	Payload    json.RawMessage // nil when the task has none
	Attempt    int             // 1 on the first run, counting retries
	MaxRetries int             // retries allowed after the first attempt
	Priority   int
	Tags       map[string]string
	Tenant     string
	TraceID    string    // W3C trace id (32 hex digits)
	LimitKey   string    // the spec's limit_key ("" when none)
	Deadline   time.Time // when this attempt's timeout ends
	Price      float64   // price per slot-hour recorded at claim (0: none)
	// Slots is the share of a worker slot the task holds while it runs
	// (task.Spec.Slots): 1 for a whole slot.
	Slots float64
	// ReadyAt is when the task last became READY, by the Redis clock (ms);
	// zero when the store did not keep it. Start − ReadyAt is the
	// scheduling latency.
	ReadyAt time.Time

	parents  task.ParentResults
	mu       sync.Mutex
	result   string
	progress func(percent int, message string) // nil: the Source keeps none
}

func newTask(qt *task.Task, deadline time.Time) *Task {
	var ready time.Time
	if qt.ReadyAt != nil {
		ready = *qt.ReadyAt
	}
	return &Task{
		ReadyAt:    ready,
		ID:         qt.ID,
		Type:       qt.Type,
		Payload:    qt.Payload,
		Attempt:    qt.Attempts,
		MaxRetries: qt.MaxRetries,
		Priority:   qt.Priority,
		Tags:       qt.Tags,
		Tenant:     qt.Tenant,
		TraceID:    qt.TraceID,
		LimitKey:   qt.LimitKey,
		Deadline:   deadline,
		Price:      qt.PricePerHour,
		Slots:      float64(qt.SlotMilli()) / task.MilliSlots,
		parents:    qt.Parents,
	}
}

// ParentResult is the result of the DAG node's parent node (its node id
// in the run's definition), as that parent's handler gave it; ok is false
// when the task is no DAG node, node is none of its parents, or the
// parent gave no result it still kept (it did not succeed, as under
// trigger rule all_done, or its result_ttl passed before the release).
// A remote worker sees a JSON result as its JSON text and a text result
// as the text.
func (t *Task) ParentResult(node string) (result string, ok bool) {
	b, ok := t.parents[node]
	return string(b), ok
}

// DecodeParent unmarshals the JSON result of parent node into v: a
// missing result is an error, and a malformed one NonRetryable.
func (t *Task) DecodeParent(node string, v any) error {
	b, ok := t.parents[node]
	if !ok {
		return fmt.Errorf("worker: %s has no result of parent %q", t.ID, node)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return NonRetryable(fmt.Errorf("result of parent %q of %s: %w", node, t.Type, err))
	}
	return nil
}

// Parents are the node ids of the parents whose results the task holds.
func (t *Task) Parents() []string {
	ids := make([]string, 0, len(t.parents))
	for id := range t.parents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// SetResult sets the text (or bytes) recorded with a success; the last
// call wins. A result over the region's limit (Options.MaxResultBytes)
// fails the attempt for good (RESULT_TOO_LARGE): it is never cut. Clients
// read it with GET /v1/tasks/{id}/result until the task's result_ttl.
func (t *Task) SetResult(s string) {
	t.mu.Lock()
	t.result = s
	t.mu.Unlock()
}

// SetResultJSON sets the JSON encoding of v as the result (SetResult).
func (t *Task) SetResultJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("worker: result of %s: %w", t.Type, err)
	}
	t.SetResult(string(b))
	return nil
}

// SetProgress reports how far the handler got: percent (cut to 0..100)
// and a short message (at most task.MaxProgressMessage bytes), shown on
// the task (GET /v1/tasks/{id}, ax get, the event stream). Call it as
// often as you like: it never blocks, the newest call wins, and the worker
// sends at most one a second per task with its heartbeat (a remote worker:
// with its next report). Within an attempt the shown percent never goes
// down; a new attempt starts again at 0.
func (t *Task) SetProgress(percent int, message string) {
	if t.progress == nil {
		return
	}
	t.progress(min(max(percent, 0), 100), clampText(message, task.MaxProgressMessage))
}

// Result is the text given to SetResult.
func (t *Task) Result() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result
}

// Decode unmarshals the payload into v. A malformed payload will not get
// better on retry, so its error is NonRetryable.
func (t *Task) Decode(v any) error {
	if len(t.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(t.Payload, v); err != nil {
		return NonRetryable(fmt.Errorf("payload of %s: %w", t.Type, err))
	}
	return nil
}

// Causes of a handler context ending early, as context.Cause reports them.
var (
	// ErrCanceled: the task's cancellation was requested.
	ErrCanceled = errors.New("worker: task canceled")
	// ErrPreempted: the leader preempts the task for a more urgent one; it
	// is given back and runs again later.
	ErrPreempted = errors.New("worker: task preempted")
	// ErrLeaseLost: the lease expired or was taken over; another worker may
	// already run the task, and nothing this attempt reports is recorded.
	ErrLeaseLost = errors.New("worker: lease lost")
	// ErrDeadline: the attempt's timeout passed.
	ErrDeadline = errors.New("worker: task deadline exceeded")
	// ErrShutdown: the worker is shutting down and the grace period is over;
	// the task is given back without spending a retry.
	ErrShutdown = errors.New("worker: worker shutting down")
)

// ErrNonRetryable marks errors that no retry can fix. Wrap it
// (fmt.Errorf("bad input: %w", worker.ErrNonRetryable)) or use NonRetryable.
var ErrNonRetryable = errors.New("non-retryable")

// NonRetryable marks err as final: the task goes to FAILED (reason
// NON_RETRYABLE) without spending its retries. The result still matches
// err with errors.Is and errors.As. NonRetryable(nil) is nil.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &nonRetryableError{err: err}
}

type nonRetryableError struct{ err error }

func (e *nonRetryableError) Error() string   { return e.err.Error() }
func (e *nonRetryableError) Unwrap() []error { return []error{e.err, ErrNonRetryable} }

// RetryAfter asks for the task to run again after d, because what it calls
// is not ready (an upstream's 429 with Retry-After, a quota window): the
// tenant's tasks of the task's limit key (of its type when it names none)
// are paused until then for every worker of the region, and the task goes
// back READY without spending a retry (docs/limits.md). d is cut to queue.MaxRetryAfter (1h).
// err says why (it may be nil); the result matches it with errors.Is/As.
func RetryAfter(d time.Duration, err error) error {
	return &RetryAfterError{After: d, Err: err}
}

// RetryAfterError is what RetryAfter returns; errors.As finds it.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %s", e.After)
	}
	return fmt.Sprintf("retry after %s: %v", e.After, e.Err)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// clampText cuts s to at most max bytes without splitting a UTF-8 sequence.
func clampText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

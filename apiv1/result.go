package apiv1

import (
	"encoding/json"
	"time"

	"github.com/ax-sched/ax/task"
)

// MaxResultWait bounds GET /v1/tasks/{id}/result's wait.
const MaxResultWait = time.Minute

// TaskResult answers GET /v1/tasks/{id}/result: 200 once the task is
// terminal (Done), 202 while it is not when the wait ended.
type TaskResult struct {
	ID    string     `json:"id"`
	State task.State `json:"state"`
	// Done is true once the task is SUCCESS, FAILED or CANCELED.
	Done bool `json:"done"`
	// Reason is the reason of the task's last step (RESULT_TOO_LARGE,
	// RETRIES_EXHAUSTED, CANCELED_BY_USER, ...).
	Reason string `json:"reason,omitempty"`
	// Result (SUCCESS) is what the handler gave back: JSON as that value,
	// any other text as a JSON string. Absent: none given.
	Result json.RawMessage `json:"result,omitempty"`
	// ResultBase64 holds a result that is not UTF-8 text, base64-encoded
	// (then Result is absent).
	ResultBase64 []byte `json:"result_base64,omitempty"`
	// Error (FAILED, CANCELED) is the last attempt's error.
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts"`
	// FinishedAt is when it became terminal; ResultExpiresAt when a
	// SUCCESS record and its result are due for removal (its result_ttl).
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	ResultExpiresAt *time.Time `json:"result_expires_at,omitempty"`
	// Progress is the latest attempt's progress (nil: none reported).
	Progress *task.Progress `json:"progress,omitempty"`
}

package apiv1

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"

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

// ResultValue is a result as one JSON value: JSON text as that value, any
// other UTF-8 text as a JSON string, bytes as a JSON string of their
// standard base64.
func ResultValue(b []byte) json.RawMessage {
	switch {
	case json.Valid(b):
		return json.RawMessage(b)
	case utf8.Valid(b):
		s, _ := json.Marshal(string(b))
		return s
	}
	s, _ := json.Marshal(base64.StdEncoding.EncodeToString(b))
	return s
}

// ResultText is what ResultValue encoded, for a handler: a JSON string's
// text, any other JSON value's text.
func ResultText(v json.RawMessage) []byte {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return []byte(s)
	}
	return v
}

// WireParents are a task's parents' results as WorkerTask.Parents gives
// them (nil: none).
func WireParents(p task.ParentResults) map[string]json.RawMessage {
	if len(p) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(p))
	for k, v := range p {
		out[k] = ResultValue(v)
	}
	return out
}

// ParentsOf reads WorkerTask.Parents back (nil: none).
func ParentsOf(w map[string]json.RawMessage) task.ParentResults {
	if len(w) == 0 {
		return nil
	}
	out := make(task.ParentResults, len(w))
	for k, v := range w {
		out[k] = ResultText(v)
	}
	return out
}

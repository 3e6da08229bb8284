package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// ErrNotDone: Wait's timeout passed before the task was terminal.
var ErrNotDone = errors.New("client: the task is not done yet")

// TaskFailedError is Wait's error for a task that ended FAILED or
// CANCELED: its reason and its last error.
type TaskFailedError struct {
	ID      string
	State   task.State
	Reason  string // RESULT_TOO_LARGE, RETRIES_EXHAUSTED, CANCELED_BY_USER, ...
	Message string // the last attempt's error
}

func (e *TaskFailedError) Error() string {
	return fmt.Sprintf("task %s ended %s (%s): %s", e.ID, e.State, e.Reason, e.Message)
}

func (c *Client) result(ctx context.Context, id string, wait time.Duration) (*apiv1.TaskResult, error) {
	var q url.Values
	if wait > 0 {
		q = url.Values{"wait": {wait.String()}}
	}
	var out apiv1.TaskResult
	if _, err := c.do(ctx, http.MethodGet, taskPath(id, "result"), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Wait waits, through c, up to timeout (0: not at all, one look) for the task to be
// terminal, wherever it runs (GET /v1/tasks/{id}/result), and returns its
// result (Result: JSON; Result of a handler's plain text:
// a JSON string). A task that ended FAILED or CANCELED is a
// *TaskFailedError; one still not terminal after timeout is ErrNotDone,
// with its last answer (state, progress). A server busy with other waits
// (429) is asked again after its Retry-After.
func Wait(ctx context.Context, c *Client, id string, timeout time.Duration) (*apiv1.TaskResult, error) {
	end := time.Now().Add(timeout)
	var asked time.Time
	for {
		// A server that answers before the wait it was asked for (an
		// older one, without waits) is asked again no more than 5 times
		// a second.
		if err := sleepCtx(ctx, min(time.Until(asked.Add(200*time.Millisecond)), time.Until(end))); err != nil {
			return nil, err
		}
		asked = time.Now()
		wait := min(max(time.Until(end), 0), apiv1.MaxResultWait).Truncate(time.Millisecond)
		res, err := c.result(ctx, id, wait)
		var api *APIError
		switch {
		case errors.As(err, &api) && errors.Is(err, ErrSaturated) && time.Until(end) > api.RetryAfter:
			if err := sleepCtx(ctx, max(api.RetryAfter, 100*time.Millisecond)); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		case res.State == task.Success:
			return res, nil
		case res.Done:
			return res, &TaskFailedError{ID: id, State: res.State, Reason: res.Reason, Message: res.Error}
		case time.Until(end) <= 0:
			return res, ErrNotDone
		}
	}
}

package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Submit submits one task (POST /v1/tasks). A repeated idempotency key
// answers 200 with the first task: Duplicate is set then.
func (c *Client) Submit(ctx context.Context, spec *task.Spec) (*apiv1.SubmitResponse, error) {
	if spec == nil {
		return nil, errors.New("client: Submit: nil spec")
	}
	var out apiv1.SubmitResponse
	status, err := c.do(ctx, http.MethodPost, "/v1/tasks", nil, spec, &out)
	if err != nil {
		return nil, err
	}
	out.Duplicate = out.Duplicate || status == http.StatusOK
	return &out, nil
}

// Get reads a task (GET /v1/tasks/{id}).
func (c *Client) Get(ctx context.Context, id string) (*task.Task, error) {
	var out task.Task
	if _, err := c.do(ctx, http.MethodGet, taskPath(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Trail reads a task's transitions (GET /v1/tasks/{id}/trail).
func (c *Client) Trail(ctx context.Context, id string) (*apiv1.TrailResponse, error) {
	var out apiv1.TrailResponse
	if _, err := c.do(ctx, http.MethodGet, taskPath(id, "trail"), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel cancels a task (POST /v1/tasks/{id}/cancel). A RUNNING task is
// only asked to stop: Requested is set and the worker stops it at its next
// heartbeat.
func (c *Client) Cancel(ctx context.Context, id string) (*apiv1.CancelResponse, error) {
	var out apiv1.CancelResponse
	if _, err := c.do(ctx, http.MethodPost, taskPath(id, "cancel"), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Replay puts a dead letter (FAILED) back to PENDING (POST
// /v1/tasks/{id}/replay).
func (c *Client) Replay(ctx context.Context, id string) (*apiv1.TaskUpdate, error) {
	var out apiv1.TaskUpdate
	if _, err := c.do(ctx, http.MethodPost, taskPath(id, "replay"), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetPriority changes a waiting task's priority, 0 (highest) to
// task.MaxPriority (POST /v1/tasks/{id}/priority).
func (c *Client) SetPriority(ctx context.Context, id string, priority int) (*apiv1.TaskUpdate, error) {
	var out apiv1.TaskUpdate
	in := apiv1.PriorityRequest{Priority: &priority}
	if _, err := c.do(ctx, http.MethodPost, taskPath(id, "priority"), nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BulkCancel cancels every PENDING or READY task matching the filter (POST
// /v1/tasks/cancel), in every region of the federation, or in
// filter.Region only. An empty filter is refused here, before any request:
// it would mean "everything".
//
// The answer counts the cancelled tasks in all and per region. A region
// that did not answer is listed in Unavailable (the call still succeeds
// when one region answered); repeating the call is safe.
func (c *Client) BulkCancel(ctx context.Context, filter apiv1.BulkCancelRequest) (*apiv1.BulkCancelResponse, error) {
	if filter.Type == "" && filter.State == "" && filter.Tenant == "" {
		return nil, errors.New("client: BulkCancel: give at least one of type, state, tenant")
	}
	var out apiv1.BulkCancelResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/tasks/cancel", nil, filter, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeadLetterFilter selects dead letters; zero fields do not filter (a zero
// Limit leaves the page size to the server).
type DeadLetterFilter struct {
	Type   string
	Tenant string
	// Region lists only the dead letters held in this region; "" lists
	// every region's.
	Region string
	Limit  int
	// Cursor continues a listing: the NextCursor of the previous page.
	Cursor string
	// Offset skips this many (after Cursor). Prefer Cursor: it does not
	// shift when dead letters arrive or leave between pages.
	Offset int
}

// DeadLetters lists dead letters, newest first, merged from every region of
// the federation (GET /v1/dlq?type=&tenant=&region=&limit=&cursor=&offset=).
// Each task's HeldBy names its region. Pass the answer's NextCursor back
// as Cursor for the next page; it is empty after the last. A region that
// did not answer is listed in Unavailable and its dead letters are missing
// (the call still succeeds when one region answered).
func (c *Client) DeadLetters(ctx context.Context, f DeadLetterFilter) (*apiv1.TaskList, error) {
	q := url.Values{}
	if f.Type != "" {
		q.Set("type", f.Type)
	}
	if f.Tenant != "" {
		q.Set("tenant", f.Tenant)
	}
	if f.Region != "" {
		q.Set("region", f.Region)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	if f.Offset > 0 {
		q.Set("offset", strconv.Itoa(f.Offset))
	}
	var out apiv1.TaskList
	if _, err := c.do(ctx, http.MethodGet, "/v1/dlq", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TaskFilter selects tasks for ListTasks; zero fields do not filter (a zero
// Limit leaves the page size to the server).
type TaskFilter struct {
	State  task.State
	Type   string
	Tenant string // a tenant's token lists its own tenant's whatever this says
	Pool   string
	// LimitKey lists only the tasks naming this concurrency limit key.
	LimitKey string
	// Region lists only the tasks held in this region; "" every region's.
	Region string
	// CreatedAfter and CreatedBefore bound created_at (after ≤ t < before).
	CreatedAfter, CreatedBefore time.Time
	// Payload is a substring of the payload's JSON (operator tokens only).
	Payload string
	Limit   int
	// Cursor continues a listing: the NextCursor of the previous page.
	Cursor string
}

// ListTasks lists tasks, newest first, merged from every region of the
// federation (GET /v1/tasks). Each task's HeldBy names the region holding
// it; payloads are left out (Get has them). Pass the answer's NextCursor
// back as Cursor for the next page; it is empty after the last. A region
// that did not answer is listed in Unavailable (the call still succeeds
// when one region answered).
func (c *Client) ListTasks(ctx context.Context, f TaskFilter) (*apiv1.TaskList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"state": string(f.State), "type": f.Type, "tenant": f.Tenant, "pool": f.Pool,
		"region": f.Region, "payload": f.Payload, "cursor": f.Cursor, "limit_key": f.LimitKey} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.CreatedAfter.IsZero() {
		q.Set("created_after", f.CreatedAfter.Format(time.RFC3339Nano))
	}
	if !f.CreatedBefore.IsZero() {
		q.Set("created_before", f.CreatedBefore.Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out apiv1.TaskList
	if _, err := c.do(ctx, http.MethodGet, "/v1/tasks", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ValidateSpec checks a spec with the server's own rules (task.Spec.Normalize
// with the design's defaults) without changing it, so a caller can refuse
// a bad spec before sending anything. Limits a region may configure (the
// payload size) are left to the server. The error is a *task.FieldError.
func ValidateSpec(spec *task.Spec) error {
	if spec == nil {
		return &task.FieldError{Msg: "no spec"}
	}
	// A shallow copy is enough: Normalize assigns fields, it does not write
	// through the spec's maps, slices or pointers.
	c := *spec
	d := task.DefaultDefaults()
	d.MaxPayload = 0
	if err := c.Normalize(d, time.Now()); err != nil {
		var fe *task.FieldError
		if errors.As(err, &fe) {
			return fe
		}
		return &task.FieldError{Msg: fmt.Sprint(err)}
	}
	return nil
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ax-sched/ax/apiv1"
)

// DAG runs and cron schedules pass through as JSON: the client checks that
// what it sends is JSON and returns the server's answer as it is.

// SubmitDAG starts a DAG run (POST /v1/dags): nodes with id and depends_on.
func (c *Client) SubmitDAG(ctx context.Context, dag json.RawMessage) (json.RawMessage, error) {
	return c.rawCall(ctx, http.MethodPost, "/v1/dags", dag)
}

// GetDAG reads a DAG run and its nodes (GET /v1/dags/{id}).
func (c *Client) GetDAG(ctx context.Context, id string) (json.RawMessage, error) {
	return c.rawCall(ctx, http.MethodGet, "/v1/dags/"+url.PathEscape(id), nil)
}

// CancelDAG cancels a DAG run (POST /v1/dags/{id}/cancel): its WAITING
// nodes end CANCELED at once, its released nodes' tasks are cancelled (a
// RUNNING one is asked to stop), and the run ends CANCELED once every node
// settled. The answer is the run (GetDAG's shape, with cancel_requested_at);
// a repeat, or a run that had already ended, answers the run unchanged.
func (c *Client) CancelDAG(ctx context.Context, id string) (json.RawMessage, error) {
	return c.rawCall(ctx, http.MethodPost, "/v1/dags/"+url.PathEscape(id)+"/cancel", nil)
}

// CreateSchedule creates a cron schedule (POST /v1/schedules).
func (c *Client) CreateSchedule(ctx context.Context, schedule json.RawMessage) (json.RawMessage, error) {
	return c.rawCall(ctx, http.MethodPost, "/v1/schedules", schedule)
}

// ListSchedules lists the schedules (GET /v1/schedules): a token of one
// tenant its tenant's, one of every tenant every tenant's.
func (c *Client) ListSchedules(ctx context.Context) (json.RawMessage, error) {
	return c.ListSchedulesOf(ctx, "")
}

// ListSchedulesOf lists tenant's schedules ("" as ListSchedules).
func (c *Client) ListSchedulesOf(ctx context.Context, tenant string) (json.RawMessage, error) {
	return c.scheduleCall(ctx, http.MethodGet, "/v1/schedules", tenant)
}

// Each tenant names its schedules in a namespace of its own. The calls on
// one schedule address the caller's tenant's; the ...Of forms name the
// tenant, which a token of every tenant needs when two tenants use the
// name (409 field tenant otherwise).

// GetSchedule reads one schedule (GET /v1/schedules/{name}).
func (c *Client) GetSchedule(ctx context.Context, name string) (json.RawMessage, error) {
	return c.GetScheduleOf(ctx, "", name)
}

// GetScheduleOf reads tenant's schedule name.
func (c *Client) GetScheduleOf(ctx context.Context, tenant, name string) (json.RawMessage, error) {
	return c.scheduleCall(ctx, http.MethodGet, schedulePath(name), tenant)
}

// DeleteSchedule deletes a schedule (DELETE /v1/schedules/{name}).
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.DeleteScheduleOf(ctx, "", name)
}

// DeleteScheduleOf deletes tenant's schedule name.
func (c *Client) DeleteScheduleOf(ctx context.Context, tenant, name string) error {
	_, err := c.scheduleCall(ctx, http.MethodDelete, schedulePath(name), tenant)
	return err
}

// PauseSchedule stops a schedule from firing (POST
// /v1/schedules/{name}/pause). The answer may be empty.
func (c *Client) PauseSchedule(ctx context.Context, name string) (json.RawMessage, error) {
	return c.PauseScheduleOf(ctx, "", name)
}

// PauseScheduleOf pauses tenant's schedule name.
func (c *Client) PauseScheduleOf(ctx context.Context, tenant, name string) (json.RawMessage, error) {
	return c.scheduleCall(ctx, http.MethodPost, schedulePath(name)+"/pause", tenant)
}

// ResumeSchedule lets a paused schedule fire again (POST
// /v1/schedules/{name}/resume). The answer may be empty.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (json.RawMessage, error) {
	return c.ResumeScheduleOf(ctx, "", name)
}

// ResumeScheduleOf resumes tenant's schedule name.
func (c *Client) ResumeScheduleOf(ctx context.Context, tenant, name string) (json.RawMessage, error) {
	return c.scheduleCall(ctx, http.MethodPost, schedulePath(name)+"/resume", tenant)
}

// Backfills runs a schedule's past periods: a range (backfill), one
// period again (rerun), and reads what they did.
func (c *Client) Backfills() *Backfills { return &Backfills{c: c} }

// Backfills is Client.Backfills. Each call addresses tenant's schedule
// name ("": the caller's tenant).
type Backfills struct{ c *Client }

// Start starts the runs of schedule name's periods in [req.From, req.To],
// oldest first, at most req.MaxActive at once (POST
// /v1/schedules/{name}/backfill).
func (b *Backfills) Start(ctx context.Context, tenant, name string, req apiv1.BackfillRequest) (*apiv1.Backfill, error) {
	var out apiv1.Backfill
	_, err := b.c.do(ctx, http.MethodPost, schedulePath(name)+"/backfill", tenantQuery(tenant), req, &out)
	return &out, err
}

// Rerun runs one period of schedule name again, under a new run id (POST
// /v1/schedules/{name}/rerun).
func (b *Backfills) Rerun(ctx context.Context, tenant, name string, req apiv1.RerunRequest) (*apiv1.Backfill, error) {
	var out apiv1.Backfill
	_, err := b.c.do(ctx, http.MethodPost, schedulePath(name)+"/rerun", tenantQuery(tenant), req, &out)
	return &out, err
}

// List lists the backfills and reruns of schedule name, newest first (GET
// /v1/schedules/{name}/backfills).
func (b *Backfills) List(ctx context.Context, tenant, name string) (*apiv1.BackfillList, error) {
	var out apiv1.BackfillList
	_, err := b.c.do(ctx, http.MethodGet, schedulePath(name)+"/backfills", tenantQuery(tenant), nil, &out)
	return &out, err
}

// Cancel cancels the backfill (or rerun) id of schedule name: no period
// of it starts any more and its active runs are asked to stop (POST
// /v1/schedules/{name}/backfills/{id}/cancel).
func (b *Backfills) Cancel(ctx context.Context, tenant, name, id string) (*apiv1.Backfill, error) {
	var out apiv1.Backfill
	_, err := b.c.do(ctx, http.MethodPost, schedulePath(name)+"/backfills/"+url.PathEscape(id)+"/cancel", tenantQuery(tenant), nil, &out)
	return &out, err
}

func tenantQuery(tenant string) url.Values {
	if tenant == "" {
		return nil
	}
	return url.Values{"tenant": {tenant}}
}

func schedulePath(name string) string { return "/v1/schedules/" + url.PathEscape(name) }

// scheduleCall is a bodiless schedule call, with tenant= when tenant is
// set.
func (c *Client) scheduleCall(ctx context.Context, method, path, tenant string) (json.RawMessage, error) {
	var q url.Values
	if tenant != "" {
		q = url.Values{"tenant": {tenant}}
	}
	var out json.RawMessage
	if _, err := c.do(ctx, method, path, q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// rawCall sends body (when non-nil) and returns the answer's body, nil when
// it is empty.
func (c *Client) rawCall(ctx context.Context, method, path string, body json.RawMessage) (json.RawMessage, error) {
	var in any
	if body != nil {
		if !json.Valid(body) {
			return nil, errors.New("client: " + method + " " + path + ": body is not valid JSON")
		}
		in = body
	}
	var out json.RawMessage
	if _, err := c.do(ctx, method, path, nil, in, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListDAGs lists DAG runs of every region, newest first (GET /v1/dags);
// pass NextCursor back in f.Cursor for the next page.
func (c *Client) ListDAGs(ctx context.Context, f apiv1.DAGFilter) (*apiv1.DAGList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"tenant": f.Tenant, "name": f.Name, "state": string(f.State), "cursor": f.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out apiv1.DAGList
	if _, err := c.do(ctx, http.MethodGet, "/v1/dags", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

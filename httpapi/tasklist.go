package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// listTasks is GET /v1/tasks: every region's tasks (or region='s only)
// that match the filters, merged newest first and paged by cursor; see
// federation.Node.Tasks.
func (th *taskHandlers) listTasks(w http.ResponseWriter, r *http.Request, p Principal) error {
	q, err := parseTaskQuery(r.URL.RawQuery, p)
	if err != nil {
		return err
	}
	pg, err := th.lists.Tasks(r.Context(), q, endpoint.Hops(r))
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.TaskList{Tasks: pg.Tasks, NextCursor: pg.NextCursor, Regions: endpoint.Outcomes(pg.Regions), Unavailable: pg.Unavailable})
	return nil
}

// taskParams are GET /v1/tasks's parameters; any other is refused (a typo
// must not turn a filtered listing into a full one).
var taskParams = []string{"state", "type", "tenant", "pool", "region", "created_after", "created_before", "limit_key", "payload", "limit", "cursor"}

// maxPayloadFilter bounds payload=: a substring search, not a document.
const maxPayloadFilter = 256

// parseTaskQuery reads GET /v1/tasks's parameters. A scoped principal's
// tenant replaces any tenant= it gives (another tenant's is refused); the
// payload search is for operators, since a payload may hold what its
// submitter alone should read.
func parseTaskQuery(raw string, p Principal) (fanout.TaskQuery, error) {
	q := fanout.TaskQuery{Limit: 100}
	v, err := endpoint.ParseQuery(raw, taskParams...)
	if err != nil {
		return q, err
	}
	for k, vs := range v {
		if len(vs) > 1 {
			return q, &task.FieldError{Field: k, Msg: "given more than once"}
		}
	}
	f := &q.Filter
	if s := v.Get("state"); s != "" {
		st := task.State(strings.ToUpper(s))
		switch st {
		case task.Pending, task.HandedOff, task.Ready, task.Running, task.Success, task.Failed, task.Canceled, task.Timeout:
			// TIMEOUT is in the state enum but no task rests in it: its page is empty.
			f.State = st
		default:
			return q, &task.FieldError{Field: "state", Msg: "must be one of PENDING, HANDED_OFF, READY, RUNNING, SUCCESS, FAILED, CANCELED, TIMEOUT"}
		}
	}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"created_after", &f.CreatedFrom}, {"created_before", &f.CreatedTo}} {
		if s := v.Get(t.name); s != "" {
			tm, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, &task.FieldError{Field: t.name, Msg: "an RFC 3339 time with its zone, e.g. 2026-12-01T17:00:00Z"}
			}
			*t.to = tm
		}
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && !f.CreatedFrom.Before(f.CreatedTo) {
		return q, &task.FieldError{Field: "created_before", Msg: "must be after created_after"}
	}
	if s := v.Get("limit"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > federation.MaxTaskLimit {
			return q, &task.FieldError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d", federation.MaxTaskLimit)}
		}
		q.Limit = k
	}
	if s := v.Get("payload"); s != "" {
		if p.Role < RoleOperator {
			return q, &endpoint.Error{Code: apiv1.CodeForbidden, Msg: "searching payloads needs an operator token", Field: "payload"}
		}
		if len(s) > maxPayloadFilter {
			return q, &task.FieldError{Field: "payload", Msg: fmt.Sprintf("at most %d bytes", maxPayloadFilter)}
		}
		f.Payload = s
	}
	f.Type, f.Tenant, f.Pool, f.LimitKey = v.Get("type"), v.Get("tenant"), v.Get("pool"), v.Get("limit_key")
	q.Region, q.Cursor = v.Get("region"), v.Get("cursor")
	f.Tenant, err = p.Scope(f.Tenant, "list")
	return q, err
}

package fanout

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"net/url"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// TaskQuery is a listing of tasks (GET /v1/tasks), its values checked by
// the API. Filter's Before and Limit are set from Cursor and Limit.
type TaskQuery struct {
	Filter queue.ListQuery
	Region string // only this region; "" every region
	Limit  int    // 1..queue.MaxList
	Cursor string // "" from the newest; else a page's NextCursor
}

// Values are the query's filters as GET /v1/tasks takes them (a peer is
// asked with them).
func (q TaskQuery) Values() url.Values {
	v := url.Values{}
	f := q.Filter
	for k, s := range map[string]string{"state": string(f.State), "type": f.Type, "tenant": f.Tenant,
		"pool": f.Pool, "payload": f.Payload, "limit_key": f.LimitKey} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !f.CreatedFrom.IsZero() {
		v.Set("created_after", f.CreatedFrom.UTC().Format(time.RFC3339Nano))
	}
	if !f.CreatedTo.IsZero() {
		v.Set("created_before", f.CreatedTo.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// Task listing cursors are opaque to clients: base64url of "t1:<id>" (the
// listing runs by id, descending; ids are unique across regions and sort
// by the time they were made, so every region reads the same cursor).
func taskCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("t1:" + id))
}

func parseTaskCursor(s string) (string, error) {
	bad := &task.FieldError{Field: "cursor", Msg: "not a cursor of this listing (pass next_cursor back as it was given)"}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", bad
	}
	id, ok := strings.CutPrefix(string(b), "t1:")
	if !ok {
		return "", bad
	}
	if _, err := task.ParseID(id); err != nil {
		return "", bad
	}
	return id, nil
}

// Tasks lists the tasks of every region (or q.Region) that match q, newest
// first by id, merged: a page of q.Limit after q.Cursor. Each task's
// HeldBy names the region whose store holds it; a task handed off is
// listed once, as its holder has it. Payloads are left out of the listing
// (GET /v1/tasks/{id} has them), which keeps a page of 1 000 small. A
// cursor that is not one of this listing's is a *task.FieldError (cursor).
func (rd *Reader) Tasks(ctx context.Context, q TaskQuery, hops int) (*DeadLetterPage, error) {
	f := q.Filter
	f.Before, f.Limit = "", 0
	query := TaskQuery{Filter: f}.Values()
	if q.Cursor != "" {
		id, err := parseTaskCursor(q.Cursor)
		if err != nil {
			return nil, err
		}
		f.Before = id
		query.Set("cursor", q.Cursor)
	}
	regions, err := rd.fanOutRegions(q.Region, hops)
	if err != nil {
		return nil, err
	}
	return rd.mergedPage(ctx, regions, listing{
		op: "tasks", path: "/v1/tasks", query: query,
		local: func(ctx context.Context, limit int) ([]*task.Task, bool, error) {
			lq := f
			lq.Limit = limit
			ts, more, err := rd.cfg.Store.List(ctx, lq)
			for _, t := range ts {
				t.Payload = nil
			}
			return ts, more, err
		},
		keep: func(t *task.Task) bool {
			m := f
			m.Payload = "" // matched where the payload is; not in the answer
			return m.Matches(t) && (f.Before == "" || t.ID < f.Before)
		},
		first:  func(a, b *task.Task) bool { return a.ID > b.ID },
		cursor: func(t *task.Task) string { return taskCursor(t.ID) },
	}, max(q.Limit, 1))
}

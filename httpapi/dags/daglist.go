package dags

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// listDAGs is GET /v1/dags: every region's runs (each region lists those
// whose home it is; region= one region's), merged newest first and paged by
// a cursor that spans regions. A token of one tenant lists that tenant's.
func (srv *Handlers) listDAGs(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	dags, err := srv.runs()
	if err != nil {
		return err
	}
	v, err := endpoint.ParseQuery(r.URL.RawQuery, "tenant", "name", "state", "region", "limit", "cursor")
	if err != nil {
		return err
	}
	f := apiv1.DAGFilter{Limit: 100, Tenant: v.Get("tenant"), Name: v.Get("name"), Cursor: v.Get("cursor")}
	if s := v.Get("limit"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > 1000 {
			return &task.FieldError{Field: "limit", Msg: "must be 1..1000"}
		}
		f.Limit = k
	}
	if s := v.Get("state"); s != "" {
		f.State = task.DAGState(strings.ToUpper(s))
		switch f.State {
		case task.DAGRunning, task.DAGSuccess, task.DAGFailed, task.DAGCanceled:
		default:
			return &task.FieldError{Field: "state", Msg: "must be RUNNING, SUCCESS, FAILED or CANCELED"}
		}
	}
	if _, _, ok := apiv1.ParseDAGCursor(f.Cursor); f.Cursor != "" && !ok {
		return &task.FieldError{Field: "cursor", Msg: "not a cursor of this listing"}
	}
	if f.Tenant, err = p.Scope(f.Tenant, "list"); err != nil {
		return err
	}
	regions, err := srv.cfg.Fed.FanOutRegions(v.Get("region"), endpoint.Hops(r))
	if err != nil {
		return err
	}
	pages := fanout.Pages(r.Context(), regions, srv.cfg.Fed.Region(),
		func(ctx context.Context) (p fanout.Page[apiv1.DAGSummary]) {
			p.Items, p.Next, p.Err = dags.List(ctx, f)
			return p
		},
		func(ctx context.Context, reg string) fanout.Page[apiv1.DAGSummary] {
			q := url.Values{"region": {reg}, "limit": {strconv.Itoa(f.Limit)}}
			for k, s := range map[string]string{"tenant": f.Tenant, "name": f.Name, "state": string(f.State), "cursor": f.Cursor} {
				if s != "" {
					q.Set(k, s)
				}
			}
			var l apiv1.DAGList
			err := srv.cfg.Fed.Proxy(ctx, reg, http.MethodGet, "/v1/dags?"+q.Encode(), nil, &l)
			return fanout.Page[apiv1.DAGSummary]{Items: l.Runs, Next: l.NextCursor, Err: err}
		})
	m, err := fanout.MergePages(regions, pages, f.Limit, byMark)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.DAGList{Runs: m.Items, NextCursor: m.Next, Regions: endpoint.Outcomes(m.Parts), Unavailable: m.Unavailable})
	return nil
}

// byMark merges the regions' pages of runs: newest first by their
// cursors (ms.id). A region's cursor is its page's last run, and its next
// page holds the runs older than it: that run is on this page, those
// older wait.
var byMark = fanout.Order[apiv1.DAGSummary]{
	Newer:     func(a, b apiv1.DAGSummary) bool { return newerMark(a.Cursor(), b.Cursor()) },
	Mark:      apiv1.DAGSummary.Cursor,
	NewerMark: newerMark,
	Past:      func(s apiv1.DAGSummary, mark string) bool { return newerMark(mark, s.Cursor()) },
}

// newerMark orders listing cursors (ms.id) newest first.
func newerMark(a, b string) bool {
	am, ai, _ := apiv1.ParseDAGCursor(a)
	bm, bi, _ := apiv1.ParseDAGCursor(b)
	return am > bm || am == bm && ai > bi
}

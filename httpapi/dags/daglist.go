package dags

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

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
	type part struct {
		runs []apiv1.DAGSummary
		next string
		err  error
	}
	parts := make([]part, len(regions))
	var wg sync.WaitGroup
	for i, reg := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if reg == srv.cfg.Fed.Region() {
				parts[i].runs, parts[i].next, parts[i].err = dags.List(r.Context(), f)
				return
			}
			q := url.Values{"region": {reg}, "limit": {strconv.Itoa(f.Limit)}}
			for k, s := range map[string]string{"tenant": f.Tenant, "name": f.Name, "state": string(f.State), "cursor": f.Cursor} {
				if s != "" {
					q.Set(k, s)
				}
			}
			var l apiv1.DAGList
			ctx, cancel := context.WithTimeout(r.Context(), fanout.Deadline)
			defer cancel()
			parts[i].err = srv.cfg.Fed.Proxy(ctx, reg, http.MethodGet, "/v1/dags?"+q.Encode(), nil, &l)
			parts[i].runs, parts[i].next = l.Runs, l.NextCursor
		}()
	}
	wg.Wait()
	// Merge: a region with more to give bounds the page at its cursor, so
	// nothing older than what it gave is listed before what it holds back.
	out := apiv1.DAGList{Runs: []apiv1.DAGSummary{}}
	var all []apiv1.DAGSummary
	bound, answered := "", 0
	var firstErr error
	for i, pt := range parts {
		ro := apiv1.RegionOutcome{Region: regions[i]}
		if pt.err != nil {
			b := endpoint.ErrorOf(pt.err).Body()
			ro.Error = &b
			out.Unavailable = append(out.Unavailable, regions[i])
			if firstErr == nil {
				firstErr = pt.err
			}
		} else {
			answered++
			ro.Count = len(pt.runs)
			all = append(all, pt.runs...)
			if pt.next != "" && (bound == "" || newerMark(pt.next, bound)) {
				bound = pt.next
			}
		}
		out.Regions = append(out.Regions, ro)
	}
	if answered == 0 {
		return firstErr
	}
	sort.Slice(all, func(i, j int) bool { return newerMark(all[i].Cursor(), all[j].Cursor()) })
	for _, s := range all {
		if bound != "" && !newerMark(s.Cursor(), bound) {
			break
		}
		if len(out.Runs) == f.Limit {
			break
		}
		out.Runs = append(out.Runs, s)
	}
	switch {
	case len(out.Runs) == f.Limit && len(all) > f.Limit || len(out.Runs) == f.Limit && bound != "":
		out.NextCursor = out.Runs[len(out.Runs)-1].Cursor()
	case bound != "":
		out.NextCursor = bound
	}
	endpoint.WriteJSON(w, http.StatusOK, out)
	return nil
}

// newerMark orders listing cursors (ms.id) newest first.
func newerMark(a, b string) bool {
	am, ai, _ := apiv1.ParseDAGCursor(a)
	bm, bi, _ := apiv1.ParseDAGCursor(b)
	return am > bm || am == bm && ai > bi
}

package batches

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// maxList bounds a page of GET /v1/batches.
const maxList = 500

// list is GET /v1/batches: the batches of every region (or ?region=),
// newest first by creation, merged; a page ends where a region with more
// to give stopped, so no batch is skipped between pages. A region that
// did not answer is in unavailable (when none did, the first error).
func (h *Handlers) list(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	bs, err := h.batches()
	if err != nil {
		return err
	}
	q, err := endpoint.ParseQuery(r.URL.RawQuery, "tenant", "limit", "after", "region")
	if err != nil {
		return err
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxList {
			return &task.FieldError{Field: "limit", Msg: fmt.Sprintf("must be 1 to %d", maxList)}
		}
		limit = n
	}
	after := q.Get("after")
	if v, err := strconv.ParseInt(after, 10, 64); after != "" && (err != nil || v <= 0) {
		return &task.FieldError{Field: "after", Msg: "is not a cursor of GET /v1/batches"}
	}
	tenant, err := p.Scope(q.Get("tenant"), "list the batches of")
	if err != nil {
		return err
	}
	regions := []string{""}
	if h.cfg.Fed != nil {
		if regions, err = h.cfg.Fed.FanOutRegions(q.Get("region"), endpoint.Hops(r)); err != nil {
			return err
		}
	}
	here := ""
	if h.cfg.Fed != nil {
		here = h.cfg.Fed.Region()
	}
	pages := fanout.Pages(r.Context(), regions, here,
		func(ctx context.Context) (p fanout.Page[apiv1.BatchStatus]) {
			p.Items, p.Next, p.Err = bs.List(ctx, tenant, limit, after)
			return p
		},
		func(ctx context.Context, reg string) fanout.Page[apiv1.BatchStatus] {
			v := url.Values{"region": {reg}, "limit": {strconv.Itoa(limit)}}
			for k, s := range map[string]string{"tenant": tenant, "after": after} {
				if s != "" {
					v.Set(k, s)
				}
			}
			var l apiv1.BatchList
			err := h.cfg.Fed.Proxy(ctx, reg, http.MethodGet, "/v1/batches?"+v.Encode(), nil, &l)
			return fanout.Page[apiv1.BatchStatus]{Items: l.Batches, Next: l.Next, Err: err}
		})
	out, err := merge(regions, pages, limit)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, out)
	return nil
}

// byCreation merges the regions' pages of batches: newest first by
// creation; a region's cursor is a creation time (unix ms), and the next
// page holds the batches created before it.
var byCreation = fanout.Order[apiv1.BatchStatus]{
	Newer: func(a, b apiv1.BatchStatus) bool { return a.CreatedAt.After(b.CreatedAt) },
	Mark:  func(b apiv1.BatchStatus) string { return strconv.FormatInt(b.CreatedAt.UnixMilli(), 10) },
	NewerMark: func(a, b string) bool {
		am, _ := strconv.ParseInt(a, 10, 64)
		bm, _ := strconv.ParseInt(b, 10, 64)
		return am > bm
	},
	Past: func(b apiv1.BatchStatus, mark string) bool {
		ms, _ := strconv.ParseInt(mark, 10, 64)
		return b.CreatedAt.UnixMilli() < ms
	},
}

// merge is the page of the regions' pages: newest first, at most limit,
// ending where the region with the newest cursor stopped.
func merge(regions []string, pages []fanout.Page[apiv1.BatchStatus], limit int) (*apiv1.BatchList, error) {
	m, err := fanout.MergePages(regions, pages, limit, byCreation)
	if err != nil {
		return nil, err
	}
	out := &apiv1.BatchList{Batches: m.Items, Next: m.Next, Unavailable: m.Unavailable}
	if len(m.Parts) > 0 {
		out.Regions = endpoint.Outcomes(m.Parts)
	}
	return out, nil
}

package batches

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"

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
	parts := make([]listPart, len(regions))
	var wg sync.WaitGroup
	for i, reg := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if reg == "" || reg == h.cfg.Fed.Region() {
				parts[i].batches, parts[i].next, parts[i].err = bs.List(r.Context(), tenant, limit, after)
				return
			}
			v := url.Values{"region": {reg}, "limit": {strconv.Itoa(limit)}}
			for k, s := range map[string]string{"tenant": tenant, "after": after} {
				if s != "" {
					v.Set(k, s)
				}
			}
			var l apiv1.BatchList
			ctx, cancel := context.WithTimeout(r.Context(), fanout.Deadline)
			defer cancel()
			parts[i].err = h.cfg.Fed.Proxy(ctx, reg, http.MethodGet, "/v1/batches?"+v.Encode(), nil, &l)
			parts[i].batches, parts[i].next = l.Batches, l.Next
		}()
	}
	wg.Wait()
	out, err := merge(regions, parts, limit)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, out)
	return nil
}

// listPart is one region's answer to a listing.
type listPart struct {
	batches []apiv1.BatchStatus
	next    string // the region's cursor: creation ms, exclusive
	err     error
}

// merge is the page of the regions' parts: newest first, at most limit,
// ending where the region with the newest cursor stopped.
func merge(regions []string, parts []listPart, limit int) (*apiv1.BatchList, error) {
	out := &apiv1.BatchList{Batches: []apiv1.BatchStatus{}}
	var all []apiv1.BatchStatus
	bound, answered := int64(0), 0
	var firstErr error
	for i, pt := range parts {
		ro := apiv1.RegionOutcome{Region: regions[i]}
		if pt.err != nil {
			b := endpoint.ErrorOf(pt.err).Body()
			ro.Error = &b
			out.Unavailable = append(out.Unavailable, regions[i])
			firstErr = cmpErr(firstErr, pt.err)
		} else {
			answered++
			ro.Count = len(pt.batches)
			all = append(all, pt.batches...)
			if n, _ := strconv.ParseInt(pt.next, 10, 64); n > bound {
				bound = n
			}
		}
		if regions[i] != "" {
			out.Regions = append(out.Regions, ro)
		}
	}
	if answered == 0 {
		return nil, firstErr
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].CreatedAt.After(all[j].CreatedAt) })
	for _, b := range all {
		if bound != 0 && b.CreatedAt.UnixMilli() < bound || len(out.Batches) == limit {
			break
		}
		out.Batches = append(out.Batches, b)
	}
	switch {
	case len(out.Batches) == limit && (len(all) > limit || bound != 0):
		out.Next = strconv.FormatInt(out.Batches[len(out.Batches)-1].CreatedAt.UnixMilli(), 10)
	case bound != 0:
		out.Next = strconv.FormatInt(bound, 10)
	}
	return out, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

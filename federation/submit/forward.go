package submit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/peer"
)

// forwardSubmit sends keyed items to their key's home region in one batch
// and answers each with the home's answer.
func (n *Pipeline) forwardSubmit(ctx context.Context, home string, items []*item) {
	fail := func(err error) {
		for _, it := range items {
			it.out.Err = err
		}
	}
	api, err := n.cfg.Peer.API(home)
	if err != nil {
		fail(err)
		return
	}
	req := apiv1.BatchRequest{}
	for _, it := range items {
		b, _ := json.Marshal(it.spec)
		req.Tasks = append(req.Tasks, b)
	}
	var resp apiv1.BatchResponse
	n.cfg.Peer.Forwarded(home)
	if _, err := n.cfg.Peer.Call(ctx, api, http.MethodPost, "/v1/tasks/batch", req, &resp); err != nil {
		fail(fmt.Errorf("%w: %s: %v", peer.ErrRegionUnavailable, home, err))
		return
	}
	for k, it := range items {
		if k >= len(resp.Results) {
			it.out.Err = fmt.Errorf("%w: short answer from %s", peer.ErrRegionUnavailable, home)
			continue
		}
		it.out = outcomeOf(resp.Results[k], k)
	}
}

// outcomeOf is the outcome of the k-th task of a forwarded batch.
func outcomeOf(r apiv1.BatchItem, k int) Outcome {
	if r.Error != nil {
		// The peer names a field by its place in the batch it got; name it
		// by the spec, as a local error does (the API adds the caller's own
		// tasks[i] prefix).
		e := *r.Error
		if f, ok := strings.CutPrefix(e.Field, fmt.Sprintf("tasks[%d]", k)); ok && (f == "" || f[0] == '.') {
			e.Field = strings.TrimPrefix(f, ".")
		}
		return Outcome{Err: &peer.Error{Status: r.Status, Body: e}}
	}
	o := Outcome{ID: r.Task.ID, State: r.Task.State, Region: r.Task.Region, Duplicate: r.Task.Duplicate}
	if r.Task.Pool != nil {
		o.Pool = *r.Task.Pool
	}
	return o
}

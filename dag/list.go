package dag

import (
	"context"
	"strconv"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// listScan bounds the index entries one List reads while its filters skip
// runs: past it the page ends early, with a cursor to go on from.
const listScan = 2000

// List reads this region's runs that match f, newest first, at most
// f.Limit, and the cursor of the next page ("" at the end).
func (r *Runs) List(ctx context.Context, f apiv1.DAGFilter) ([]apiv1.DAGSummary, string, error) {
	var ms int64
	var id string
	if f.Cursor != "" {
		var ok bool
		if ms, id, ok = apiv1.ParseDAGCursor(f.Cursor); !ok {
			return nil, "", &task.FieldError{Field: "cursor", Msg: "not a cursor of this listing"}
		}
	}
	out := []apiv1.DAGSummary{}
	// Expired runs leave the index as they are met, so a read that found
	// only those still moves on; the rounds bound it all the same.
	for scanned, round := 0, 0; scanned < listScan && round < 20; round++ {
		runs, more, err := r.dags.DAGRunsBefore(ctx, ms, id, min(max(f.Limit, 100), listScan))
		if err != nil {
			return nil, "", err
		}
		for i, run := range runs {
			scanned++
			if p, err := task.ParseID(run.ID); err == nil {
				ms, id = p.Time.UnixMilli(), run.ID // the index's order
			}
			if !matches(run, f) {
				continue
			}
			out = append(out, summaryOf(run, r.cfg.Region))
			if len(out) == f.Limit {
				if more || i < len(runs)-1 {
					return out, out[len(out)-1].Cursor(), nil
				}
				return out, "", nil
			}
		}
		if !more {
			return out, "", nil
		}
	}
	// The scan budget ran out: go on from the last run read.
	return out, strconv.FormatInt(ms, 10) + "." + id, nil
}

func matches(run *queue.DAGRun, f apiv1.DAGFilter) bool {
	return (f.Tenant == "" || run.Tenant == f.Tenant) && (f.Name == "" || run.Name == f.Name) && (f.State == "" || run.State == f.State)
}

func summaryOf(run *queue.DAGRun, region string) apiv1.DAGSummary {
	s := apiv1.DAGSummary{ID: run.ID, Name: run.Name, Tenant: run.Tenant, Region: region, State: run.State,
		CreatedAt: run.CreatedAt, FinishedAt: run.FinishedAt, Nodes: map[task.NodeState]int{}}
	for _, n := range run.Nodes {
		s.Nodes[n.State]++
	}
	return s
}

package dag

import (
	"context"
	"errors"
	"fmt"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// errParentsUnread: a parent of the node could not be read now (its
// region unreachable); the node is released on a later pass, with its
// parents' results, rather than now without them.
var errParentsUnread = errors.New("dag: a parent's task could not be read")

// parentReads are the tasks of the parents of nodes being released.
type parentReads struct {
	byID  map[string]*queue.DAGNodeDef
	reads map[string]taskRead // task id → read
}

// parentResults reads the tasks of the parents of nodes, wherever they
// ran: a node's task carries its parents' results into any region.
func (r *Runs) parentResults(ctx context.Context, byID map[string]*queue.DAGNodeDef, nodes []string) parentReads {
	var ids []string
	seen := map[string]bool{}
	for _, id := range nodes {
		for _, dep := range byID[id].DependsOn {
			if tid := byID[dep].TaskID; !seen[tid] {
				seen[tid] = true
				ids = append(ids, tid)
			}
		}
	}
	return parentReads{byID: byID, reads: r.tasksOf(ctx, ids)}
}

// of is the results of nd's parents that succeeded. A parent whose task
// is gone (its result_ttl passed) is left out; one that could not be
// read is errParentsUnread.
func (p parentReads) of(nd *queue.DAGNodeDef) (task.ParentResults, error) {
	var out task.ParentResults
	for _, dep := range nd.DependsOn {
		rd := p.reads[p.byID[dep].TaskID]
		switch {
		case errors.Is(rd.err, task.ErrNotFound):
			continue
		case rd.err != nil:
			return nil, fmt.Errorf("%w: %s: %v", errParentsUnread, dep, rd.err)
		case rd.task.State != task.Success:
			continue
		}
		if out == nil {
			out = task.ParentResults{}
		}
		out[dep] = []byte(rd.task.Result)
	}
	return out, nil
}

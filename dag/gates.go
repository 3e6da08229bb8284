package dag

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Gates of a schedule's run (task.Gate): a node whose trigger rule would
// release it is held while a gate is closed. The reconciler reads the
// state of the runs its WAITING gated nodes wait for, wherever they live,
// when an upstream's end wakes it (upstreams.go), and reruns of the
// period count: a gate opens on the first success among the period's runs
// (an Exact gate, a downstream rerun's: on its own run's only).

// upstream is what a pass knows of a run a gate waits for.
type upstream int

const (
	upstreamUnread  upstream = iota // unreachable now: read again next pass
	upstreamPending                 // not started yet, or not ended
	upstreamSuccess
	upstreamFailed // ended otherwise
)

// isRoot reports whether a node is released when its run is created: it
// depends on no node and has no gate.
func isRoot(nd *queue.DAGNodeDef) bool { return len(nd.DependsOn) == 0 && len(nd.Gates) == 0 }

// gatedRuns lists the upstream runs the WAITING nodes of p wait for.
func (p *runPass) gatedRuns() []task.Gate {
	var out []task.Gate
	seen := map[string]bool{}
	for _, nd := range p.plan.def.Nodes {
		if p.states[nd.ID] != task.NodeWaiting {
			continue
		}
		for _, g := range nd.Gates {
			if g.RunID != "" && !g.Stale && !seen[g.RunID] {
				seen[g.RunID] = true
				out = append(out, g)
			}
		}
	}
	return out
}

// readUpstreams reads the state of each gate's upstream runs (periodRuns).
func (r *Runs) readUpstreams(ctx context.Context, tenant string, gates []task.Gate) map[string]upstream {
	out := make(map[string]upstream, len(gates))
	byID := make(map[string]task.Gate, len(gates))
	ids := make([]string, len(gates))
	for i, g := range gates {
		ids[i], byID[g.RunID] = g.RunID, g
	}
	var mu sync.Mutex
	eachID(ids, taskParallel, func(id string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		u := r.readPeriod(cctx, tenant, byID[id])
		cancel()
		mu.Lock()
		out[id] = u
		mu.Unlock()
	})
	return out
}

// readPeriod is what g's upstream runs say: success when one of them
// succeeded, else what the newest says (a rerun under way is waited for).
func (r *Runs) readPeriod(ctx context.Context, tenant string, g task.Gate) upstream {
	ids, err := r.periodRuns(ctx, tenant, g)
	var newest upstream
	for i, id := range slices.Backward(ids) {
		u := r.readUpstream(ctx, g, id)
		if u == upstreamSuccess {
			return u
		}
		if i == len(ids)-1 {
			newest = u
		}
	}
	if err != nil && newest != upstreamFailed {
		return upstreamUnread // its reruns are unknown: read again next pass
	}
	return newest
}

func (r *Runs) readUpstream(ctx context.Context, g task.Gate, id string) upstream {
	if g.DAG {
		state, _, ok, err := r.RunState(ctx, id)
		switch {
		case err != nil:
			return upstreamUnread
		case !ok, state == task.DAGRunning:
			return upstreamPending
		case state == task.DAGSuccess:
			return upstreamSuccess
		}
		return upstreamFailed
	}
	t, err := r.tasks.Get(ctx, id, 0)
	switch {
	case errors.Is(err, task.ErrNotFound), isNotFound(err):
		return upstreamPending
	case err != nil:
		return upstreamUnread
	case t.State == task.Success:
		return upstreamSuccess
	case t.State.Terminal():
		return upstreamFailed
	}
	return upstreamPending
}

// settleStale settles, before the trigger rules, every WAITING node one of
// whose gates can never open (latest_success found nothing recent enough):
// it fails fast instead of waiting for its upstream nodes.
func (p *runPass) settleStale() {
	for _, nd := range p.plan.def.Nodes {
		if p.states[nd.ID] != task.NodeWaiting || p.canceling {
			continue
		}
		for _, g := range nd.Gates {
			if g.Stale {
				to, reason := g.Unmet(task.ReasonUpstreamStale)
				p.step(nd.ID, task.NodeWaiting, queue.DAGNode{State: to, Reason: reason})
				break
			}
		}
	}
}

// gate decides a node its trigger rule would release: released when every
// gate is open, CANCELED (UPSTREAM_FAILED) when an upstream run ended
// otherwise than SUCCESS, settled by the gate's OnTimeout past its
// deadline, else "" (keep waiting).
func (p *runPass) gate(nd *queue.DAGNodeDef) (task.NodeState, string) {
	for _, g := range nd.Gates {
		switch p.upstreams[g.RunID] {
		case upstreamSuccess:
			continue
		case upstreamFailed:
			return task.NodeCanceled, task.ReasonUpstreamFailed
		}
		if !g.Deadline.IsZero() && p.now.After(g.Deadline) {
			return g.Unmet(task.ReasonUpstreamTimeout)
		}
		return "", ""
	}
	return task.NodeReleased, ""
}

// gateSettled reports whether a gate settled the node, without a task.
func gateSettled(rec queue.DAGNode) bool {
	return rec.Reason == task.ReasonUpstreamTimeout || rec.Reason == task.ReasonUpstreamStale
}

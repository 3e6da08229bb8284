package federation

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// dagInterval is how often the reconciler looks at every running DAG run: a
// node's dependents are released at most this long after it ends (plus the
// read of its task).
const dagInterval = 250 * time.Millisecond

// dagOrphanAfter: an id in the active set whose run does not exist this long
// after its creation time belongs to a create that failed half-way.
const dagOrphanAfter = time.Minute

// dagParallel bounds the runs reconciled at once.
const dagParallel = 8

// DAGLoop is the DAG reconciler, a region leader loop (region.Config
// LeaderLoops) of every run's home region. Every dagInterval, for each
// running DAG of the region, it
//
//  1. reads the task of every RELEASED node where it runs now (Node.Get
//     forwards to the region that holds it) and records a terminal task
//     state — SUCCESS, FAILED, CANCELED — as the node's outcome, with the
//     task's attempts, region and pool;
//  2. settles WAITING nodes in dependency order by their trigger rule:
//     all_success runs when every upstream SUCCEEDED, is CANCELED
//     (UPSTREAM_FAILED, never submitted) once one FAILED or was CANCELED,
//     and SKIPPED once one was SKIPPED; all_done runs when every upstream
//     settled; one_failed runs once an upstream FAILED or was CANCELED, and
//     is SKIPPED when all settled without one;
//  3. submits the tasks of released nodes (derived ids, unplaced: the
//     leader places each one, in any region) and records every change in
//     one fenced compare-and-set script, which ends the run — SUCCESS when
//     every node SUCCEEDED or was SKIPPED, else FAILED — and takes it out of
//     the active set.
//
// Nothing reports completions to the home region: the reconciler reads
// task states, which are the truth wherever the task ran. So a completion
// cannot be lost in transit — a region that was unreachable is simply read
// on a later pass — and a leader that dies mid-pass loses nothing: its
// successor reads the same states and repeats the same steps. Repeats are
// harmless: a node's outcome is recorded only while the node is still
// RELEASED (once per node and task attempt that ended it), a release only
// while it is WAITING, and a task id is accepted once (task.ErrExists), so
// a node never runs twice because a step was repeated. A RELEASED node whose
// task is missing (a crash between recording and submitting) is submitted
// again.
//
// A leader that was replaced is fenced: its writes carry its token, which
// the run's fence key rejects once a newer leader wrote; the loop then
// calls lost and returns.
//
// A run whose cancel was requested (Node.CancelDAG) has no WAITING node
// left: the cancel moved them all to CANCELED in the same script that
// recorded it, and UpdateDAG releases nothing of such a run. Each pass then
// records outcomes as usual, asks every released task that is not ended and
// not yet asked to stop through the task cancel path (the request's own
// attempt may have missed a region), and ends the run CANCELED once every
// node settled. A pass that submitted releases which a cancel overtook (its
// compare-and-set found the nodes CANCELED) cancels those tasks itself; so
// does, once a term, the first pass over a cancelled run, for a pass that
// died between its submit and its record.
func (n *Node) DAGLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	r := &dagReconciler{n: n, fence: f, plans: map[string]*dagPlan{}}
	t := time.NewTicker(dagInterval)
	defer t.Stop()
	for {
		if err := r.pass(ctx); errors.Is(err, queue.ErrFenced) {
			lost(err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// dagReconciler is one leader term's reconciler.
type dagReconciler struct {
	n     *Node
	fence queue.Fence

	mu    sync.Mutex
	plans map[string]*dagPlan // definitions read this term; they never change
	swept map[string]bool     // cancelled runs whose overtaken releases were withdrawn this term
}

// dagPlan is a run's definition prepared for reconciling.
type dagPlan struct {
	def   *queue.DAGDef
	order []int             // node indexes, upstream first
	tasks map[string]string // node id → task id
}

// pass reconciles every running DAG of the region once. It returns
// queue.ErrFenced when this leader was replaced.
func (r *dagReconciler) pass(ctx context.Context) error {
	ids, err := r.n.store.ActiveDAGs(ctx, queue.MaxBatch)
	if err != nil {
		if ctx.Err() == nil {
			r.n.log.Warn("DAG reconciler: active runs", "err", err)
		}
		return err
	}
	r.mu.Lock()
	active := make(map[string]bool, len(ids))
	for _, id := range ids {
		active[id] = true
	}
	for id := range r.plans {
		if !active[id] {
			delete(r.plans, id)
		}
	}
	for id := range r.swept {
		if !active[id] {
			delete(r.swept, id)
		}
	}
	r.mu.Unlock()
	var fenced error
	var fmu sync.Mutex
	eachID(ids, dagParallel, func(id string) {
		err := r.reconcile(ctx, id)
		switch {
		case errors.Is(err, queue.ErrFenced):
			fmu.Lock()
			fenced = err
			fmu.Unlock()
		case err != nil && ctx.Err() == nil:
			r.n.log.Warn("DAG reconciler", "dag", id, "err", err)
		}
	})
	return fenced
}

func (r *dagReconciler) plan(ctx context.Context, id string) (*dagPlan, error) {
	r.mu.Lock()
	p := r.plans[id]
	r.mu.Unlock()
	if p != nil {
		return p, nil
	}
	def, err := r.n.store.DAGDefinition(ctx, id)
	if err != nil {
		return nil, err
	}
	order, _ := topoOrder(def.Nodes) // validated acyclic at create
	p = &dagPlan{def: def, order: order, tasks: make(map[string]string, len(def.Nodes))}
	for _, nd := range def.Nodes {
		p.tasks[nd.ID] = nd.TaskID
	}
	r.mu.Lock()
	r.plans[id] = p
	r.mu.Unlock()
	return p, nil
}

func (r *dagReconciler) forget(ctx context.Context, id string) error {
	r.mu.Lock()
	delete(r.plans, id)
	delete(r.swept, id)
	r.mu.Unlock()
	return r.n.store.ForgetDAG(ctx, id)
}

// reconcile is one step of one run (see DAGLoop). Running it twice, or on
// two servers at once, changes nothing the first did not.
func (r *dagReconciler) reconcile(ctx context.Context, id string) error {
	n, st := r.n, r.n.store
	run, err := st.DAG(ctx, id)
	if errors.Is(err, queue.ErrDAGNotFound) {
		if p, perr := task.ParseID(id); perr != nil || time.Since(p.Time) > dagOrphanAfter {
			return r.forget(ctx, id)
		}
		return nil // being created
	}
	if err != nil {
		return err
	}
	if run.State != queue.DAGRunning {
		return r.forget(ctx, id) // ended; the active set missed it
	}
	plan, err := r.plan(ctx, id)
	if err != nil {
		return err
	}
	def := plan.def
	canceling := run.CancelRequestedAt != nil
	states := make(map[string]queue.NodeState, len(def.Nodes))
	var taskIDs []string
	for _, nd := range def.Nodes {
		states[nd.ID] = run.Nodes[nd.ID].State
		if states[nd.ID] == queue.NodeReleased {
			taskIDs = append(taskIDs, nd.TaskID)
		}
	}
	var steps []queue.DAGStep
	var missing []string
	var stop []string // task ids to cancel (a cancelled run)
	// 1. Outcomes of released nodes.
	tasks := n.dagTasks(ctx, taskIDs)
	for _, nd := range def.Nodes {
		if states[nd.ID] != queue.NodeReleased {
			continue
		}
		res := tasks[nd.TaskID]
		switch {
		case errors.Is(res.err, task.ErrNotFound):
			missing = append(missing, nd.ID)
			continue
		case res.err != nil:
			continue // unreachable now; read again next pass
		case !res.task.State.Terminal():
			if canceling && !res.task.CancelRequested {
				stop = append(stop, nd.TaskID)
			}
			continue
		}
		t := res.task
		to := queue.DAGNode{State: outcomeOf(t.State), Reason: t.Reason, Attempts: t.Attempts, Region: t.HeldBy, Pool: t.Pool}
		if to.Reason == "" && t.State == task.Success {
			to.Reason = task.ReasonCompleted
		}
		steps = append(steps, queue.DAGStep{Node: nd.ID, From: queue.NodeReleased, To: to})
		states[nd.ID] = to.State
	}
	// 2. Waiting nodes, upstream first, so a cancel or skip reaches every
	// node below it in one pass.
	var release []string
	for _, i := range plan.order {
		nd := def.Nodes[i]
		if states[nd.ID] != queue.NodeWaiting {
			continue
		}
		if canceling {
			// Not reached in practice: the cancel settled every WAITING node.
			to := queue.DAGNode{State: queue.NodeCanceled, Reason: task.ReasonCanceledByUser}
			steps = append(steps, queue.DAGStep{Node: nd.ID, From: queue.NodeWaiting, To: to})
			states[nd.ID] = to.State
			continue
		}
		ups := make([]queue.NodeState, len(nd.DependsOn))
		for k, dep := range nd.DependsOn {
			ups[k] = states[dep]
		}
		to, reason := decide(nd.TriggerRule, ups)
		switch to {
		case "":
			continue
		case queue.NodeReleased:
			release = append(release, nd.ID)
		default:
			steps = append(steps, queue.DAGStep{Node: nd.ID, From: queue.NodeWaiting, To: queue.DAGNode{State: to, Reason: reason}})
		}
		states[nd.ID] = to
	}
	// 3. Submit first, record after: a crash in between leaves a WAITING
	// node whose task exists, and the next pass's submit finds it.
	invalid, err := n.releaseDAGNodes(ctx, def, append(release, missing...))
	if err != nil {
		return err
	}
	for _, node := range release {
		to := queue.DAGNode{State: queue.NodeReleased}
		if err := invalid[node]; err != nil {
			to = queue.DAGNode{State: queue.NodeFailed, Reason: reasonInvalidSpec}
			n.log.Warn("DAG node spec no longer valid", "dag", id, "node", node, "err", err)
		}
		steps = append(steps, queue.DAGStep{Node: node, From: queue.NodeWaiting, To: to})
	}
	for _, node := range missing {
		if err := invalid[node]; err != nil {
			steps = append(steps, queue.DAGStep{Node: node, From: queue.NodeReleased, To: queue.DAGNode{State: queue.NodeFailed, Reason: reasonInvalidSpec}})
			states[node] = queue.NodeFailed
		} else {
			n.log.Info("DAG node task missing; submitted again", "dag", id, "node", node)
			if canceling {
				// Submitted only to be cancelled: the CANCELED task it leaves
				// refuses a submit still in flight (a create's roots), so the
				// node's outcome is settled by its task like any other.
				stop = append(stop, plan.tasks[node])
			}
		}
	}
	if canceling {
		swept := r.overtaken(id, def, run)
		if err := n.cancelDAGTasks(ctx, append(stop, swept...), run.CanceledBy); err != nil {
			n.log.Warn("DAG cancel: tasks not reached yet; asking again next pass", "dag", id, "err", err)
		} else if swept != nil {
			r.mu.Lock()
			r.swept[id] = true
			r.mu.Unlock()
		}
	}
	settled := true
	for _, s := range states {
		settled = settled && s.Terminal()
	}
	// A cancelled run may have settled its last nodes without a step here.
	if len(steps) == 0 && !(canceling && settled) {
		return nil
	}
	up, err := st.UpdateDAG(ctx, r.fence, id, steps)
	if len(release) > 0 && (err != nil || up.Applied < len(steps)) {
		r.withdraw(ctx, id, plan, release)
	}
	if err != nil {
		return err
	}
	if up.Applied == len(steps) { // else another pass moved first and logged
		for _, s := range steps {
			n.log.Info("DAG node", "dag", id, "node", s.Node, "state", s.To.State, "reason", s.To.Reason,
				"task", plan.tasks[s.Node])
		}
	}
	dagMetrics.released.WithLabelValues(n.cfg.Region).Add(float64(up.Released))
	if up.Ended {
		dagMetrics.runs.WithLabelValues(n.cfg.Region, string(up.State)).Inc()
		n.log.Info("DAG run ended", "dag", id, "state", up.State)
		return r.forget(ctx, id)
	}
	return nil
}

// outcomeOf is a node's state for its task's terminal state.
func outcomeOf(s task.State) queue.NodeState {
	switch s {
	case task.Success:
		return queue.NodeSuccess
	case task.Failed:
		return queue.NodeFailed
	}
	return queue.NodeCanceled
}

// decide applies a trigger rule to a WAITING node's upstream states: what
// it becomes and why, or "" to keep waiting.
func decide(rule queue.TriggerRule, ups []queue.NodeState) (queue.NodeState, string) {
	var settled, failed, skipped int
	for _, s := range ups {
		if s.Terminal() {
			settled++
		}
		switch s {
		case queue.NodeFailed, queue.NodeCanceled:
			failed++
		case queue.NodeSkipped:
			skipped++
		}
	}
	all := settled == len(ups)
	switch rule {
	case queue.AllDone:
		if all {
			return queue.NodeReleased, ""
		}
	case queue.OneFailed:
		switch {
		case failed > 0:
			return queue.NodeReleased, ""
		case all:
			return queue.NodeSkipped, reasonNoneFailed
		}
	default: // all_success
		switch {
		case failed > 0:
			return queue.NodeCanceled, task.ReasonUpstreamFailed
		case skipped > 0:
			return queue.NodeSkipped, reasonUpstreamSkipped
		case all:
			return queue.NodeReleased, ""
		}
	}
	return "", ""
}

// overtaken returns the task ids of nodes cancelled while WAITING, until
// they were all cancelled once this term (swept): a pass that submitted one
// of them and died before recording it (or before withdrawing it) left a
// task that must not run. Most are missing; cancelling a missing task is a
// no-op. It returns nil once swept, and a non-nil slice before.
func (r *dagReconciler) overtaken(id string, def *queue.DAGDef, run *queue.DAGRun) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.swept[id] {
		return nil
	}
	if r.swept == nil {
		r.swept = map[string]bool{}
	}
	ids := []string{}
	for _, nd := range def.Nodes {
		if canceledWaiting(run.Nodes[nd.ID]) {
			ids = append(ids, nd.TaskID)
		}
	}
	return ids
}

// withdraw cancels the tasks this pass submitted for nodes whose release
// was not recorded because a cancel of the run overtook it (the nodes are
// CANCELED now, never to be released). It also runs when this leader was
// fenced: a node cancelled while WAITING must not run whoever submitted its
// task.
func (r *dagReconciler) withdraw(ctx context.Context, id string, plan *dagPlan, nodes []string) {
	run, err := r.n.store.DAG(ctx, id)
	if err != nil {
		r.n.log.Warn("DAG cancel: overtaken releases not checked", "dag", id, "err", err)
		return
	}
	var ids []string
	for _, node := range nodes {
		if canceledWaiting(run.Nodes[node]) {
			ids = append(ids, plan.tasks[node])
		}
	}
	if len(ids) == 0 {
		return
	}
	r.n.log.Info("DAG cancel overtook releases; their tasks are cancelled", "dag", id, "tasks", len(ids))
	if err := r.n.cancelDAGTasks(ctx, ids, run.CanceledBy); err != nil {
		r.n.log.Warn("DAG cancel: overtaken releases not all cancelled", "dag", id, "err", err)
	}
}

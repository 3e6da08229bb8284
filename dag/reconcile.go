package dag

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// interval is how often the reconciler looks at every running DAG run: a
// node's dependents are released at most this long after it ends (plus the
// read of its task).
const interval = 250 * time.Millisecond

// orphanAfter: an id in the active set whose run does not exist this long
// after its creation time belongs to a create that failed half-way.
const orphanAfter = time.Minute

// runParallel bounds the runs reconciled at once.
const runParallel = 8

// Loop is the DAG reconciler, a region leader loop (region.LeaderLoop) of
// every run's home region. Every interval, for each
// running DAG of the region, it
//
//  1. reads the task of every RELEASED node where it runs now (Tasks.Get
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
// Once per term, alongside, it indexes the region's runs created before the
// listing's index existed (dagstore.DAGs.IndexOldDAGRuns; a no-op once done).
//
// A run whose cancel was requested (Runs.Cancel) has no WAITING node
// left: the cancel moved them all to CANCELED in the same script that
// recorded it, and UpdateDAG releases nothing of such a run. Each pass then
// records outcomes as usual, asks every released task that is not ended and
// not yet asked to stop through the task cancel path (the request's own
// attempt may have missed a region), and ends the run CANCELED once every
// node settled. A pass that submitted releases which a cancel overtook (its
// compare-and-set found the nodes CANCELED) cancels those tasks itself; so
// does, once a term, the first pass over a cancelled run, for a pass that
// died between its submit and its record.
func (r *Runs) Loop(ctx context.Context, f queue.Fence, lost func(error)) {
	rc := &reconciler{runs: r, fence: f, plans: map[string]*runPlan{}, gates: map[string]*gateReads{}, kick: make(chan struct{}, 1)}
	go r.indexOld(ctx)
	if r.ups != nil {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.ups.WatchEnds(wctx, rc.wake)
		}()
		defer func() {
			cancel()
			<-done
		}()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := rc.pass(ctx); errors.Is(err, queue.ErrFenced) {
			lost(err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-rc.kick:
		}
	}
}

// indexBatch is how many keys one SCAN of IndexOldDAGRuns reads.
const indexBatch = 1000

// indexOld lists the runs written before GET /v1/dags had an index; a
// failure is retried by the next term.
func (r *Runs) indexOld(ctx context.Context) {
	n, err := r.dags.IndexOldDAGRuns(ctx, indexBatch)
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Warn("DAG runs of before the listing index not indexed yet; the next leader term retries", "err", err)
	case n > 0:
		r.log.Info("DAG runs of before the listing index indexed", "runs", n)
	}
}

// reconciler is one leader term's reconciler.
type reconciler struct {
	runs  *Runs
	fence queue.Fence

	mu    sync.Mutex
	plans map[string]*runPlan   // definitions read this term; they never change
	swept map[string]bool       // cancelled runs whose overtaken releases were withdrawn this term
	gates map[string]*gateReads // by run id: its gates' last read
	wakes uint64                // ends that woke gates this term
	kick  chan struct{}         // an end woke gates: pass now
}

// runPlan is a run's definition prepared for reconciling.
type runPlan struct {
	def   *queue.DAGDef
	order []int             // node indexes, upstream first
	tasks map[string]string // node id → task id
}

// pass reconciles every running DAG of the region once. It returns
// queue.ErrFenced when this leader was replaced.
func (rc *reconciler) pass(ctx context.Context) error {
	ids, err := rc.runs.dags.ActiveDAGs(ctx, queue.MaxBatch)
	if err != nil {
		if ctx.Err() == nil {
			rc.runs.log.Warn("DAG reconciler: active runs", "err", err)
		}
		return err
	}
	rc.mu.Lock()
	active := make(map[string]bool, len(ids))
	for _, id := range ids {
		active[id] = true
	}
	for id := range rc.plans {
		if !active[id] {
			delete(rc.plans, id)
		}
	}
	for id := range rc.swept {
		if !active[id] {
			delete(rc.swept, id)
		}
	}
	for id := range rc.gates {
		if !active[id] {
			delete(rc.gates, id)
		}
	}
	rc.mu.Unlock()
	var fenced error
	var fmu sync.Mutex
	eachID(ids, runParallel, func(id string) {
		err := rc.reconcile(ctx, id)
		switch {
		case errors.Is(err, queue.ErrFenced):
			fmu.Lock()
			fenced = err
			fmu.Unlock()
		case err != nil && ctx.Err() == nil:
			rc.runs.log.Warn("DAG reconciler", "dag", id, "err", err)
		}
	})
	return fenced
}

func (rc *reconciler) plan(ctx context.Context, id string) (*runPlan, error) {
	rc.mu.Lock()
	p := rc.plans[id]
	rc.mu.Unlock()
	if p != nil {
		return p, nil
	}
	def, err := rc.runs.dags.DAGDefinition(ctx, id)
	if err != nil {
		return nil, err
	}
	order, _ := topoOrder(def.Nodes) // validated acyclic at create
	p = &runPlan{def: def, order: order, tasks: make(map[string]string, len(def.Nodes))}
	for _, nd := range def.Nodes {
		p.tasks[nd.ID] = nd.TaskID
	}
	rc.mu.Lock()
	rc.plans[id] = p
	rc.mu.Unlock()
	return p, nil
}

func (rc *reconciler) forget(ctx context.Context, id string) error {
	rc.mu.Lock()
	delete(rc.plans, id)
	delete(rc.swept, id)
	rc.mu.Unlock()
	return rc.runs.dags.ForgetDAG(ctx, id)
}

// reconcile is one step of one run (see Loop). Running it twice, or on
// two servers at once, changes nothing the first did not.
func (rc *reconciler) reconcile(ctx context.Context, id string) error {
	run, err := rc.runs.dags.DAG(ctx, id)
	if errors.Is(err, queue.ErrDAGNotFound) {
		return rc.dropMissing(ctx, id)
	}
	if err != nil {
		return err
	}
	if run.State != task.DAGRunning {
		// Ended; the active set missed it (or the room left was not given
		// back yet).
		return rc.finish(ctx, id)
	}
	plan, err := rc.plan(ctx, id)
	if err != nil {
		return err
	}
	p := newRunPass(id, run, plan)
	p.recordOutcomes(rc.runs.tasksOf(ctx, p.releasedTasks()))
	p.now = rc.runs.cfg.Now()
	p.settleStale()
	p.upstreams = rc.upstreamsOf(ctx, p)
	p.settleWaiting()
	// Submit first, record after: a crash in between leaves a WAITING
	// node whose task exists, and the next pass's submit finds it.
	invalid, err := rc.runs.release(ctx, plan.def, append(p.release, p.missing...))
	if err != nil {
		return err
	}
	p.recordReleases(invalid, rc.runs.log)
	if p.canceling {
		rc.stopTasks(ctx, p)
	}
	// A cancelled run may have settled its last nodes without a step here.
	if len(p.steps) == 0 && !(p.canceling && p.settled()) {
		return nil
	}
	return rc.record(ctx, p)
}

// dropMissing handles an active id whose run does not exist: a run still
// being created is left alone; one older than orphanAfter (or whose id is
// not a task id) had a create that stopped half-way, so the backlog room it
// reserved is given back and the id leaves the active set.
func (rc *reconciler) dropMissing(ctx context.Context, id string) error {
	if p, perr := task.ParseID(id); perr == nil && time.Since(p.Time) <= orphanAfter {
		return nil // being created
	}
	st := rc.runs.dags
	// A create that stopped between its backlog reservation and the run
	// left the definition: give its room back.
	def, derr := st.DAGDefinition(ctx, id)
	switch {
	case derr == nil && def.BacklogMax > 0:
		if err := st.UnreserveBacklog(ctx, def.TaskIDs()); err != nil {
			return err
		}
		if err := st.ForgetDAGDefinition(ctx, id); err != nil {
			return err
		}
	case derr != nil && !errors.Is(derr, queue.ErrDAGNotFound):
		return derr
	}
	return rc.forget(ctx, id)
}

// finish gives back an ended run's unused backlog room and takes the run
// out of the active set. On an error the run stays active, and the next
// pass finds it ended and tries again.
func (rc *reconciler) finish(ctx context.Context, id string) error {
	if err := rc.giveBack(ctx, id); err != nil {
		return err
	}
	return rc.forget(ctx, id)
}

// stopTasks asks the tasks of a cancelled run to stop: the released tasks
// not yet asked (p.stop) and, once a term, the tasks of nodes cancelled
// while WAITING (overtaken). A failure is logged and asked again next pass.
func (rc *reconciler) stopTasks(ctx context.Context, p *runPass) {
	swept := rc.overtaken(p.id, p.plan.def, p.run)
	if err := rc.runs.cancelTasks(ctx, append(p.stop, swept...), p.run.CanceledBy); err != nil {
		rc.runs.log.Warn("DAG cancel: tasks not reached yet; asking again next pass", "dag", p.id, "err", err)
	} else if swept != nil {
		rc.mu.Lock()
		rc.swept[p.id] = true
		rc.mu.Unlock()
	}
}

// record writes a pass's steps in one fenced compare-and-set, withdraws the
// releases it submitted if the write did not take them all, and finishes
// the run if the write ended it. It returns queue.ErrFenced when this
// leader was replaced.
func (rc *reconciler) record(ctx context.Context, p *runPass) error {
	up, err := rc.runs.dags.UpdateDAG(ctx, rc.fence, p.id, p.steps)
	if len(p.release) > 0 && (err != nil || up.Applied < len(p.steps)) {
		rc.withdraw(ctx, p.id, p.plan, p.release)
	}
	if err != nil {
		return err
	}
	if up.Applied == len(p.steps) { // else another pass moved first and logged
		for _, s := range p.steps {
			rc.runs.log.Info("DAG node", "dag", p.id, "node", s.Node, "state", s.To.State, "reason", s.To.Reason,
				"task", p.plan.tasks[s.Node])
		}
	}
	rc.runs.metrics.released.WithLabelValues(rc.runs.cfg.Region).Add(float64(up.Released))
	if !up.Ended {
		return nil
	}
	rc.runs.metrics.runs.WithLabelValues(rc.runs.cfg.Region, string(up.State)).Inc()
	rc.runs.log.Info("DAG run ended", "dag", p.id, "state", up.State)
	rc.runs.recordEnd(ctx, p, up.State)
	return rc.finish(ctx, p.id)
}

// runPass is one reconcile of one running run: the node states as the pass
// sees them, and what it found to do.
type runPass struct {
	id        string
	run       *queue.DAGRun
	plan      *runPlan
	canceling bool                      // the run's cancel was requested
	states    map[string]task.NodeState // node id → state, updated as steps are decided
	steps     []queue.DAGStep           // changes to record
	release   []string                  // WAITING nodes to release
	missing   []string                  // RELEASED nodes whose task does not exist
	stop      []string                  // task ids to cancel (a cancelled run)
	now       time.Time                 // the gates' deadlines are compared with it
	upstreams map[string]upstream       // the runs gates wait for, by id
}

func newRunPass(id string, run *queue.DAGRun, plan *runPlan) *runPass {
	p := &runPass{
		id:        id,
		run:       run,
		plan:      plan,
		canceling: run.CancelRequestedAt != nil,
		states:    make(map[string]task.NodeState, len(plan.def.Nodes)),
	}
	for _, nd := range plan.def.Nodes {
		p.states[nd.ID] = run.Nodes[nd.ID].State
	}
	return p
}

// releasedTasks returns the task ids of the RELEASED nodes.
func (p *runPass) releasedTasks() []string {
	var ids []string
	for _, nd := range p.plan.def.Nodes {
		if p.states[nd.ID] == task.NodeReleased {
			ids = append(ids, nd.TaskID)
		}
	}
	return ids
}

// recordOutcomes records the outcome of every RELEASED node whose task
// ended, notes the nodes whose task is missing, and, in a cancelled run,
// the tasks still running that were not asked to stop. A task that could
// not be read is read again next pass.
func (p *runPass) recordOutcomes(tasks map[string]taskRead) {
	for _, nd := range p.plan.def.Nodes {
		if p.states[nd.ID] != task.NodeReleased {
			continue
		}
		res := tasks[nd.TaskID]
		switch {
		case errors.Is(res.err, task.ErrNotFound):
			p.missing = append(p.missing, nd.ID)
			continue
		case res.err != nil:
			continue // unreachable now; read again next pass
		case !res.task.State.Terminal():
			if p.canceling && !res.task.CancelRequested {
				p.stop = append(p.stop, nd.TaskID)
			}
			continue
		}
		t := res.task
		to := queue.DAGNode{State: outcomeOf(t.State), Reason: t.Reason, Attempts: t.Attempts, Region: t.HeldBy, Pool: t.Pool}
		if to.Reason == "" && t.State == task.Success {
			to.Reason = task.ReasonCompleted
		}
		p.step(nd.ID, task.NodeReleased, to)
	}
}

// settleWaiting applies the trigger rules to WAITING nodes, upstream first,
// so a cancel or skip reaches every node below it in one pass. Nodes to
// release are noted, not stepped: their step waits for the submit.
func (p *runPass) settleWaiting() {
	def := p.plan.def
	for _, i := range p.plan.order {
		nd := def.Nodes[i]
		if p.states[nd.ID] != task.NodeWaiting {
			continue
		}
		if p.canceling {
			// Not reached in practice: the cancel settled every WAITING node.
			p.step(nd.ID, task.NodeWaiting, queue.DAGNode{State: task.NodeCanceled, Reason: task.ReasonCanceledByUser})
			continue
		}
		ups := make([]task.NodeState, len(nd.DependsOn))
		for k, dep := range nd.DependsOn {
			ups[k] = p.states[dep]
		}
		to, reason := decide(nd.TriggerRule, ups)
		if to == task.NodeReleased && len(nd.Gates) > 0 {
			to, reason = p.gate(&nd)
		}
		switch to {
		case "":
			continue
		case task.NodeReleased:
			p.release = append(p.release, nd.ID)
		default:
			p.steps = append(p.steps, queue.DAGStep{Node: nd.ID, From: task.NodeWaiting, To: queue.DAGNode{State: to, Reason: reason}})
		}
		p.states[nd.ID] = to
	}
}

// recordReleases adds the steps of the nodes just submitted: a released
// node is RELEASED, or FAILED when its spec is no longer valid (invalid);
// a missing task submitted again leaves its node RELEASED, or FAILED for
// the same reason. In a cancelled run, a task submitted again is cancelled
// too.
func (p *runPass) recordReleases(invalid map[string]error, log *slog.Logger) {
	for _, node := range p.release {
		to := queue.DAGNode{State: task.NodeReleased}
		if errors.Is(invalid[node], errParentsUnread) {
			p.states[node] = task.NodeWaiting // released on a later pass
			log.Info("DAG node waits for its parents' results", "dag", p.id, "node", node, "err", invalid[node])
			continue
		}
		if err := invalid[node]; err != nil {
			to = queue.DAGNode{State: task.NodeFailed, Reason: reasonInvalidSpec}
			log.Warn("DAG node spec no longer valid", "dag", p.id, "node", node, "err", err)
		}
		p.steps = append(p.steps, queue.DAGStep{Node: node, From: task.NodeWaiting, To: to})
	}
	for _, node := range p.missing {
		if errors.Is(invalid[node], errParentsUnread) {
			continue // submitted on a later pass
		}
		if err := invalid[node]; err != nil {
			p.step(node, task.NodeReleased, queue.DAGNode{State: task.NodeFailed, Reason: reasonInvalidSpec})
			continue
		}
		log.Info("DAG node task missing; submitted again", "dag", p.id, "node", node)
		if p.canceling {
			// Submitted only to be cancelled: the CANCELED task it leaves
			// refuses a submit still in flight (a create's roots), so the
			// node's outcome is settled by its task like any other.
			p.stop = append(p.stop, p.plan.tasks[node])
		}
	}
}

// step records a node's change and the state the rest of the pass sees.
func (p *runPass) step(node string, from task.NodeState, to queue.DAGNode) {
	p.steps = append(p.steps, queue.DAGStep{Node: node, From: from, To: to})
	p.states[node] = to.State
}

// settled reports whether every node is in a terminal state.
func (p *runPass) settled() bool {
	for _, s := range p.states {
		if !s.Terminal() {
			return false
		}
	}
	return true
}

// giveBack gives back the backlog room an ended run reserved and its
// nodes did not take (nodes skipped, cancelled or never released).
func (rc *reconciler) giveBack(ctx context.Context, id string) error {
	plan, err := rc.plan(ctx, id)
	if errors.Is(err, queue.ErrDAGNotFound) {
		return nil // expired with its room given back before
	}
	if err != nil {
		return err
	}
	if plan.def.BacklogMax <= 0 {
		return nil
	}
	return rc.runs.dags.UnreserveBacklog(ctx, plan.def.TaskIDs())
}

// outcomeOf is a node's state for its task's terminal state.
func outcomeOf(s task.State) task.NodeState {
	switch s {
	case task.Success:
		return task.NodeSuccess
	case task.Failed:
		return task.NodeFailed
	}
	return task.NodeCanceled
}

// decide applies a trigger rule to a WAITING node's upstream states: what
// it becomes and why, or "" to keep waiting.
func decide(rule task.TriggerRule, ups []task.NodeState) (task.NodeState, string) {
	var settled, failed, skipped int
	for _, s := range ups {
		if s.Terminal() {
			settled++
		}
		switch s {
		case task.NodeFailed, task.NodeCanceled:
			failed++
		case task.NodeSkipped:
			skipped++
		}
	}
	all := settled == len(ups)
	switch rule {
	case task.AllDone:
		if all {
			return task.NodeReleased, ""
		}
	case task.OneFailed:
		switch {
		case failed > 0:
			return task.NodeReleased, ""
		case all:
			return task.NodeSkipped, reasonNoneFailed
		}
	default: // all_success
		switch {
		case failed > 0:
			return task.NodeCanceled, task.ReasonUpstreamFailed
		case skipped > 0:
			return task.NodeSkipped, reasonUpstreamSkipped
		case all:
			return task.NodeReleased, ""
		}
	}
	return "", ""
}

// overtaken returns the task ids of nodes cancelled while WAITING, until
// they were all cancelled once this term (swept): a pass that submitted one
// of them and died before recording it (or before withdrawing it) left a
// task that must not run. Most are missing; cancelling a missing task is a
// no-op. It returns nil once swept, and a non-nil slice before.
func (rc *reconciler) overtaken(id string, def *queue.DAGDef, run *queue.DAGRun) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.swept[id] {
		return nil
	}
	if rc.swept == nil {
		rc.swept = map[string]bool{}
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
func (rc *reconciler) withdraw(ctx context.Context, id string, plan *runPlan, nodes []string) {
	run, err := rc.runs.dags.DAG(ctx, id)
	if err != nil {
		rc.runs.log.Warn("DAG cancel: overtaken releases not checked", "dag", id, "err", err)
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
	rc.runs.log.Info("DAG cancel overtook releases; their tasks are cancelled", "dag", id, "tasks", len(ids))
	if err := rc.runs.cancelTasks(ctx, ids, run.CanceledBy); err != nil {
		rc.runs.log.Warn("DAG cancel: overtaken releases not all cancelled", "dag", id, "err", err)
	}
}

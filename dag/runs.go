package dag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/dagstore"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
)

// Tasks is what a DAG run needs of the federation; federation.Node
// implements it.
type Tasks interface {
	// SubmitFixed stores tasks (normalized, with their fixed ids) in this
	// region, unplaced: the region's leader places each one when due. The
	// results are submit.Submitter.Submit's; an id held already is ErrExists.
	SubmitFixed(ctx context.Context, tasks ...queue.NewTask) ([]queue.SubmitResult, error)
	// Get reads a task wherever it is held; hops is how many servers the
	// request being served has passed (0 from a leader loop).
	Get(ctx context.Context, id string, hops int) (*task.Task, error)
	// CancelTask asks the task id to stop wherever it is held, as by; a
	// task missing or ended already is not an error.
	CancelTask(ctx context.Context, id, by string) error
	// Proxy sends one request to the API of another region's server and
	// decodes its answer into out; an error answer is the peer's error.
	Proxy(ctx context.Context, region, method, path string, in, out any) error
}

// Config configures the DAG runs of one server.
type Config struct {
	Region string // this server's region: the home of the runs it accepts
	// Defaults are the task defaults node specs are normalized with
	// (default task.DefaultDefaults()).
	Defaults task.Defaults
	// Backlog is a tenant's max_backlog in this region (0 or nil: none). A
	// run of a tenant with one reserves room for all its nodes when it is
	// created (dagstore.DAGs.ReserveBacklog), or is refused.
	Backlog func(tenant string) int
	// Regions are the federation's regions (config `regions:`; Region is
	// one too): a node's task naming another in its regions is refused
	// (400 naming nodes[i].task.regions[j]), as a task submitted alone is,
	// rather than stored to wait PENDING forever. nil: not checked.
	Regions    []string
	Registerer prometheus.Registerer // ax_dag_runs_total and ax_dag_nodes_released_total; nil: not registered
	Logger     *slog.Logger
	Now        func() time.Time
}

// Runs are the DAG runs whose home is this server's region: the API creates,
// reads and cancels them through it, and Loop, a region leader loop,
// reconciles them.
//
// Any server accepts a run; its region becomes the run's home, written into
// the run's id (the task id format). The definition and every node's state
// live in one slot of the home region's Redis (queue/dagstore). Each node's
// task id is derived from (run id, node id), so releasing a node twice
// submits the same id, which the store accepts once. A released task is
// submitted unplaced into the home region's store; the region leader places
// it like any due task — in any region, handed off through the outbox — so
// every node is placed on its own. The reconciler (Loop) settles nodes and
// releases their dependents. A cancel (Cancel) stops a run: its waiting
// nodes are never released, its released nodes' tasks are cancelled. It
// reaches tasks in other regions, and the other regions' servers, through
// Tasks.
type Runs struct {
	dags    *dagstore.DAGs
	tasks   Tasks
	cfg     Config
	ups     Upstreams // nil: gates read every pass, reruns unseen
	log     *slog.Logger
	metrics struct {
		runs, released *prometheus.CounterVec
	}
}

// New prepares the DAG runs kept in dags, the home region's store of runs,
// whose tasks go through tasks.
func New(dags *dagstore.DAGs, tasks Tasks, cfg Config) *Runs {
	if cfg.Defaults == (task.Defaults{}) {
		cfg.Defaults = task.DefaultDefaults()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Runs{dags: dags, tasks: tasks, cfg: cfg, log: cfg.Logger}
	r.metrics.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_dag_runs_total",
		Help: "DAG runs entering a state: RUNNING (accepted), SUCCESS, FAILED, CANCELED."}, []string{"region", "state"})
	r.metrics.released = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_dag_nodes_released_total",
		Help: "DAG nodes released (their task submitted), counted once per node."}, []string{"region"})
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(r.metrics.runs, r.metrics.released)
	}
	return r
}

// Create validates and stores a DAG run in this region (its home) and
// releases its root nodes. The request's tenant is settled by the caller.
func (r *Runs) Create(ctx context.Context, req *apiv1.DAGRequest) (*apiv1.DAGStatus, error) {
	def, err := r.define(req, r.cfg.Now())
	if err != nil {
		return nil, err
	}
	return r.create(ctx, def)
}

// create stores the run def and releases its root nodes.
func (r *Runs) create(ctx context.Context, def *queue.DAGDef) (*apiv1.DAGStatus, error) {
	initial := map[string]queue.DAGNode{}
	var roots []string
	for _, nd := range def.Nodes {
		if isRoot(&nd) {
			initial[nd.ID] = queue.DAGNode{State: task.NodeReleased}
			roots = append(roots, nd.ID)
		}
	}
	if r.cfg.Backlog != nil {
		def.BacklogMax = r.cfg.Backlog(def.Tenant)
	}
	if err := r.dags.CreateDAG(ctx, def, initial); err != nil {
		if errors.Is(err, queue.ErrBacklogFull) {
			// Tasks finish on their own time: a few seconds is a fair retry.
			return nil, &apiv1.Error{Code: apiv1.CodeQuotaExceeded, Field: "max_backlog", RetryAfterSeconds: 5,
				Message: fmt.Sprintf("tenant %s has no room for %d more tasks in this region: its max_backlog is %d; wait for some to finish",
					def.Tenant, len(def.Nodes), def.BacklogMax)}
		}
		return nil, err
	}
	r.metrics.runs.WithLabelValues(r.cfg.Region, string(task.DAGRunning)).Inc()
	r.metrics.released.WithLabelValues(r.cfg.Region).Add(float64(len(roots)))
	r.log.Info("DAG run accepted", "dag", def.ID, "name", def.Name, "tenant", def.Tenant, "nodes", len(def.Nodes), "roots", len(roots))
	// The roots are RELEASED from birth; should this submit fail, the
	// reconciler finds their tasks missing and submits them.
	if _, err := r.release(ctx, def, roots); err != nil {
		r.log.Warn("DAG roots not submitted yet; the reconciler will", "dag", def.ID, "err", err)
	}
	st := &apiv1.DAGStatus{ID: def.ID, Name: def.Name, Tenant: def.Tenant, Region: r.cfg.Region, State: task.DAGRunning,
		CreatedAt: mustParseID(def.ID).Time, Schedule: def.Schedule, Period: periodOf(def), Nodes: make([]apiv1.DAGNodeStatus, len(def.Nodes))}
	for i, nd := range def.Nodes {
		s := task.NodeWaiting
		if isRoot(&nd) {
			s = task.NodeReleased
		}
		st.Nodes[i] = apiv1.DAGNodeStatus{ID: nd.ID, DependsOn: nd.DependsOn, TriggerRule: nd.TriggerRule, State: s, TaskID: nd.TaskID, Gates: nd.Gates}
	}
	return st, nil
}

func mustParseID(id string) task.ParsedID {
	p, _ := task.ParseID(id)
	return p
}

// releaseDAGNodes submits the tasks of nodes into this region's store,
// unplaced, with their derived ids: a task already there (released before)
// is left as it is. Specs are normalized now, so a node's delay counts from
// its release. Each task carries its node's parents' results
// (task.Spec.Parents). invalid names the nodes whose spec no longer
// validates (the region's defaults changed since the run was accepted, or
// the parents' results are over task.MaxParentResults), and those whose
// parents could not be read now (errParentsUnread: released on a later
// pass); they are not submitted.
func (r *Runs) release(ctx context.Context, def *queue.DAGDef, nodes []string) (invalid map[string]error, err error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	now := r.cfg.Now()
	byID := make(map[string]*queue.DAGNodeDef, len(def.Nodes))
	for i := range def.Nodes {
		byID[def.Nodes[i].ID] = &def.Nodes[i]
	}
	parents := r.parentResults(ctx, byID, nodes)
	tasks := make([]queue.NewTask, 0, len(nodes))
	for _, id := range nodes {
		nd := byID[id]
		sp, err := task.DecodeSpec(nd.Task)
		if err == nil {
			sp.Tenant = def.Tenant
			sp.Parents, err = parents.of(nd)
		}
		if err == nil {
			err = sp.Normalize(r.cfg.Defaults, now)
		}
		if err != nil {
			if invalid == nil {
				invalid = map[string]error{}
			}
			invalid[id] = err
			continue
		}
		tasks = append(tasks, queue.NewTask{ID: nd.TaskID, Spec: sp, Reserved: def.BacklogMax > 0})
	}
	if len(tasks) == 0 {
		return invalid, nil
	}
	res, err := r.tasks.SubmitFixed(ctx, tasks...)
	if err != nil {
		return nil, fmt.Errorf("release DAG %s nodes: %w", def.ID, err)
	}
	for _, res := range res {
		if res.Err != nil && !errors.Is(res.Err, task.ErrExists) {
			return nil, fmt.Errorf("release DAG %s task %s: %w", def.ID, res.ID, res.Err)
		}
	}
	return invalid, nil
}

// home is the home region a DAG run id names, where its state lives;
// ErrDAGNotFound for an id that is not one, or for another region's run
// asked of a forwarded request (one forward at most).
func (r *Runs) home(id string, hops int) (string, error) {
	p, err := task.ParseID(id)
	if err != nil || p.Region != r.cfg.Region && hops > 0 {
		return "", fmt.Errorf("%w: %s", queue.ErrDAGNotFound, id)
	}
	return p.Region, nil
}

// Status returns a DAG run wherever it lives: from this region's store when
// it is home, else from its home region (named in the id) through one
// forward. Tenant checks are the caller's.
func (r *Runs) Status(ctx context.Context, id string, hops int) (*apiv1.DAGStatus, error) {
	home, err := r.home(id, hops)
	if err != nil {
		return nil, err
	}
	if home != r.cfg.Region {
		var st apiv1.DAGStatus
		if err := r.tasks.Proxy(ctx, home, http.MethodGet, "/v1/dags/"+url.PathEscape(id), nil, &st); err != nil {
			return nil, err
		}
		return &st, nil
	}
	def, err := r.dags.DAGDefinition(ctx, id)
	if err != nil {
		return nil, err
	}
	run, err := r.dags.DAG(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &apiv1.DAGStatus{ID: id, Name: def.Name, Tenant: def.Tenant, Region: r.cfg.Region, State: run.State,
		CreatedAt: run.CreatedAt, FinishedAt: run.FinishedAt, CancelRequestedAt: run.CancelRequestedAt,
		CancelRequestedBy: run.CanceledBy, Schedule: def.Schedule, Period: periodOf(def), Nodes: make([]apiv1.DAGNodeStatus, len(def.Nodes))}
	var live []string
	for _, nd := range def.Nodes {
		if run.Nodes[nd.ID].State == task.NodeReleased {
			live = append(live, nd.TaskID)
		}
	}
	tasks := r.tasksOf(ctx, live)
	for i, nd := range def.Nodes {
		rec := run.Nodes[nd.ID]
		ns := apiv1.DAGNodeStatus{ID: nd.ID, DependsOn: nd.DependsOn, TriggerRule: nd.TriggerRule, State: rec.State,
			Reason: rec.Reason, TaskID: nd.TaskID, Region: rec.Region, Pool: rec.Pool, Attempts: rec.Attempts, Gates: nd.Gates}
		if !rec.At.IsZero() {
			at := rec.At
			ns.UpdatedAt = &at
		}
		switch rec.State {
		case task.NodeReleased:
			if r := tasks[nd.TaskID]; r.task != nil {
				ns.TaskState, ns.Region, ns.Pool, ns.Attempts = r.task.State, r.task.HeldBy, r.task.Pool, r.task.Attempts
				if r.task.State == task.HandedOff {
					ns.Region = r.task.HandedOffTo
				}
			}
		case task.NodeSuccess:
			ns.TaskState = task.Success
		case task.NodeFailed:
			if !gateSettled(rec) && rec.Reason != reasonInvalidSpec {
				ns.TaskState = task.Failed
			}
		case task.NodeCanceled:
			if !neverSubmitted(rec) {
				ns.TaskState = task.Canceled
			}
		}
		st.Nodes[i] = ns
	}
	return st, nil
}

// taskRead is one task read for a DAG node: the task or why not.
type taskRead struct {
	task *task.Task
	err  error
}

// taskParallel bounds the calls about a run's tasks made at once (they
// may live in other regions: one call each).
const taskParallel = 16

// eachID runs fn for every id, up to limit at a time, and returns when all
// are done. fn runs concurrently: it guards what it shares.
func eachID(ids []string, limit int, fn func(id string)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(id)
		}()
	}
	wg.Wait()
}

// tasksOf reads tasks wherever they run (Tasks.Get forwards), a few at a
// time.
func (r *Runs) tasksOf(ctx context.Context, ids []string) map[string]taskRead {
	out := make(map[string]taskRead, len(ids))
	var mu sync.Mutex
	eachID(ids, taskParallel, func(id string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t, err := r.tasks.Get(cctx, id, 0)
		cancel()
		mu.Lock()
		out[id] = taskRead{task: t, err: err}
		mu.Unlock()
	})
	return out
}

// neverSubmitted reports whether a CANCELED node settled without a task:
// for an upstream failure, or because its run was cancelled while it was
// WAITING. A node whose task ended CANCELED records the region that held the
// task; a node cancelled while WAITING records none.
func neverSubmitted(rec queue.DAGNode) bool {
	return rec.Reason == task.ReasonUpstreamFailed || canceledWaiting(rec)
}

// canceledWaiting reports whether a node was WAITING when its run was
// cancelled (dagstore.DAGs.CancelDAG records no region).
func canceledWaiting(rec queue.DAGNode) bool {
	return rec.State == task.NodeCanceled && rec.Reason == task.ReasonCanceledByUser && rec.Region == ""
}

// Cancel cancels a DAG run wherever it lives: at home, or through one
// forward to the home region named in the id (as DAG reads do). At home it
// records the request and moves every WAITING node to CANCELED
// (CANCELED_BY_USER) in one script (dagstore.DAGs.CancelDAG), then asks every
// released node's task to stop through the task cancel path (Tasks.CancelTask: PENDING
// and READY end CANCELED at once, RUNNING gets a cancel request, a task
// handed off is reached where it is). What did not get through now — a
// region unreachable — the leader's reconciler asks again; it records every
// node's outcome and ends the run CANCELED once all settled. A repeat, or a
// cancel of a run that ended, changes nothing. tenant, when not "", must be
// the run's: another tenant's run is queue.ErrDAGNotFound and untouched. by
// is recorded as who asked. The run is returned as DAG returns it.
func (r *Runs) Cancel(ctx context.Context, id, tenant, by string, hops int) (*apiv1.DAGStatus, error) {
	home, err := r.home(id, hops)
	if err != nil {
		return nil, err
	}
	if home != r.cfg.Region {
		q := url.Values{apiv1.ParamOnBehalfOf: {by}}
		if tenant != "" {
			q.Set(apiv1.ParamForTenant, tenant)
		}
		var st apiv1.DAGStatus
		path := "/v1/dags/" + url.PathEscape(id) + "/cancel?" + q.Encode()
		if err := r.tasks.Proxy(ctx, home, http.MethodPost, path, nil, &st); err != nil {
			return nil, err
		}
		return &st, nil
	}
	c, err := r.dags.CancelDAG(ctx, id, tenant, by)
	if err != nil {
		return nil, err
	}
	if c.First {
		r.log.Info("DAG run cancel requested", "dag", id, "by", by, "waiting_canceled", c.Canceled)
	}
	if c.State == task.DAGRunning {
		def, err := r.dags.DAGDefinition(ctx, id)
		if err != nil {
			return nil, err
		}
		run, err := r.dags.DAG(ctx, id)
		if err != nil {
			return nil, err
		}
		// Every released task, and the derived id of every node cancelled
		// while WAITING: a release the cancel overtook may have submitted it.
		var ids []string
		for _, nd := range def.Nodes {
			rec := run.Nodes[nd.ID]
			if rec.State == task.NodeReleased || canceledWaiting(rec) {
				ids = append(ids, nd.TaskID)
			}
		}
		if err := r.cancelTasks(ctx, ids, by); err != nil {
			// The request is recorded: the leader's reconciler asks again.
			r.log.Warn("DAG cancel: some tasks not reached yet; the reconciler will retry", "dag", id, "err", err)
		}
	}
	return r.Status(ctx, id, hops)
}

// cancelTasks cancels tasks of a DAG run, wherever each is held, a few at
// a time, through the task cancel path (Tasks.CancelTask), as by. Tasks
// that are missing or already ended count as done; it returns the first
// other error.
func (r *Runs) cancelTasks(ctx context.Context, ids []string, by string) error {
	var mu sync.Mutex
	var first error
	eachID(ids, taskParallel, func(id string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.tasks.CancelTask(cctx, id, by)
		cancel()
		if err == nil {
			return
		}
		mu.Lock()
		if first == nil {
			first = fmt.Errorf("cancel task %s: %w", id, err)
		}
		mu.Unlock()
	})
	return first
}

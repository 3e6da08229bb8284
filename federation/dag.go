package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// DAG runs (DESIGN §4, issue 6): tasks with dependencies.
//
// Any server accepts a run; its region becomes the run's home, written into
// the run's id (the task id format). The definition and every node's state
// live in one slot of the home region's Redis (queue/dag.go). Each node's
// task id is derived from (run id, node id), so releasing a node twice
// submits the same id, which the store accepts once. A released task is
// submitted unplaced into the home region's store; the region leader places
// it like any due task — in any region, handed off through the outbox — so
// every node is placed on its own. The reconciler (DAGLoop) settles nodes
// and releases their dependents. A cancel (CancelDAG) stops a run: its
// waiting nodes are never released, its released nodes' tasks are cancelled.

// MaxDAGNodes bounds one DAG run.
const MaxDAGNodes = 1000

// DAGRequest is the body of POST /v1/dags. Each node's task spec goes
// under "task", as the body of POST /v1/tasks would (idempotency_key
// excepted: a node's task id is derived from the run).
type DAGRequest struct {
	Name   string `json:"name,omitempty"`
	Tenant string `json:"tenant,omitempty"` // from the token when it names one
	// Nodes in any order; at most MaxDAGNodes.
	Nodes []DAGNodeSpec `json:"nodes"`
}

// DAGNodeSpec is one node of a DAGRequest.
type DAGNodeSpec struct {
	ID          string            `json:"id"`
	DependsOn   []string          `json:"depends_on,omitempty"`
	TriggerRule queue.TriggerRule `json:"trigger_rule,omitempty"` // default all_success
	Task        json.RawMessage   `json:"task"`
}

// DAGStatus is a DAG run as the API shows it (201 of POST /v1/dags, 200 of
// GET /v1/dags/{id}).
type DAGStatus struct {
	ID         string         `json:"id"`
	Name       string         `json:"name,omitempty"`
	Tenant     string         `json:"tenant"`
	Region     string         `json:"region"` // home: where the run's state lives
	State      queue.DAGState `json:"state"`
	CreatedAt  time.Time      `json:"created_at"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
	// CancelRequestedAt is set once POST /v1/dags/{id}/cancel reached the
	// run while it was RUNNING; the run ends CANCELED once every node settled.
	CancelRequestedAt *time.Time      `json:"cancel_requested_at,omitempty"`
	CancelRequestedBy string          `json:"cancel_requested_by,omitempty"`
	Nodes             []DAGNodeStatus `json:"nodes"`
}

// DAGNodeStatus is one node of a DAGStatus.
type DAGNodeStatus struct {
	ID          string            `json:"id"`
	DependsOn   []string          `json:"depends_on,omitempty"`
	TriggerRule queue.TriggerRule `json:"trigger_rule"`
	State       queue.NodeState   `json:"state"`
	Reason      string            `json:"reason,omitempty"`
	// TaskID is the id the node's task has, or will have once released.
	// Nodes SKIPPED, CANCELED for an upstream failure, or CANCELED by a
	// cancel of the run while WAITING never get a task.
	TaskID    string     `json:"task_id"`
	TaskState task.State `json:"task_state,omitempty"`
	Region    string     `json:"region,omitempty"` // where its task runs or ran
	Pool      string     `json:"pool,omitempty"`
	Attempts  int        `json:"attempts,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// Reasons a node settles with besides its task's own.
const (
	reasonUpstreamSkipped = "UPSTREAM_SKIPPED"   // all_success with a SKIPPED upstream
	reasonNoneFailed      = "NO_UPSTREAM_FAILED" // one_failed, and nothing failed
	reasonInvalidSpec     = "INVALID_SPEC"       // the spec no longer validates at release
)

var (
	// Node ids are DNS-label-like; _ is allowed (Airflow habits).
	nodeIDRe  = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)
	dagNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)
	tenantRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) // as queue's spec tenant
)

func nodeField(i int, rest string) string {
	if rest == "" {
		return fmt.Sprintf("nodes[%d]", i)
	}
	return fmt.Sprintf("nodes[%d].%s", i, rest)
}

// prefixed moves a spec's FieldError under nodes[i].task.
func prefixed(i int, err error) error {
	var fe *task.FieldError
	if errors.As(err, &fe) {
		f := nodeField(i, "task")
		if fe.Field != "" {
			f += "." + fe.Field
		}
		return &task.FieldError{Field: f, Msg: fe.Msg}
	}
	return err
}

// planDAG validates a request (tenant already settled) into a definition
// with its id and derived task ids. Errors are *task.FieldError naming the
// field: nodes[i].id, nodes[i].depends_on[j], nodes[i].task.<field>, and
// nodes for a cycle, whose message walks it: "cycle: a -> b -> a" (x -> y:
// y depends on x).
func (n *Node) planDAG(req *DAGRequest, now time.Time) (*queue.DAGDef, error) {
	if req.Name != "" && !dagNameRe.MatchString(req.Name) {
		return nil, &task.FieldError{Field: "name", Msg: "1–128 letters, digits and _ . : / - only"}
	}
	tenant := req.Tenant
	if tenant == "" {
		tenant = "default"
	} else if !tenantRe.MatchString(tenant) {
		return nil, &task.FieldError{Field: "tenant", Msg: "letters, digits, _ . - only (at most 64)"}
	}
	switch {
	case len(req.Nodes) == 0:
		return nil, &task.FieldError{Field: "nodes", Msg: "a DAG needs at least one node"}
	case len(req.Nodes) > MaxDAGNodes:
		return nil, &task.FieldError{Field: "nodes", Msg: fmt.Sprintf("at most %d nodes", MaxDAGNodes)}
	}
	def := &queue.DAGDef{Name: req.Name, Tenant: tenant, Nodes: make([]queue.DAGNodeDef, len(req.Nodes))}
	index := make(map[string]int, len(req.Nodes))
	for i, nd := range req.Nodes {
		switch {
		case nd.ID == "":
			return nil, &task.FieldError{Field: nodeField(i, "id"), Msg: "is required"}
		case !nodeIDRe.MatchString(nd.ID):
			return nil, &task.FieldError{Field: nodeField(i, "id"), Msg: fmt.Sprintf("node id %q: 1–63 lowercase letters, digits, - and _, starting and ending with a letter or digit", nd.ID)}
		}
		if j, dup := index[nd.ID]; dup {
			return nil, &task.FieldError{Field: nodeField(i, "id"), Msg: fmt.Sprintf("duplicate node id %q (also nodes[%d])", nd.ID, j)}
		}
		index[nd.ID] = i
		rule := nd.TriggerRule
		switch rule {
		case "":
			rule = queue.AllSuccess
		case queue.AllSuccess, queue.AllDone:
		case queue.OneFailed:
			if len(nd.DependsOn) == 0 {
				return nil, &task.FieldError{Field: nodeField(i, "trigger_rule"), Msg: "one_failed needs at least one depends_on"}
			}
		default:
			return nil, &task.FieldError{Field: nodeField(i, "trigger_rule"), Msg: fmt.Sprintf("%q: must be all_success, all_done or one_failed", rule)}
		}
		if t := strings.TrimSpace(string(nd.Task)); t == "" || t == "null" {
			return nil, &task.FieldError{Field: nodeField(i, "task"), Msg: "is required: the node's task spec"}
		}
		sp, err := task.DecodeSpec(nd.Task)
		if err != nil {
			return nil, prefixed(i, err)
		}
		if sp.Tenant != "" && sp.Tenant != tenant {
			return nil, &task.FieldError{Field: nodeField(i, "task.tenant"), Msg: fmt.Sprintf("must be the DAG's tenant %q (or left out)", tenant)}
		}
		if sp.IdempotencyKey != "" {
			return nil, &task.FieldError{Field: nodeField(i, "task.idempotency_key"), Msg: "not allowed in a DAG node: its task id is derived from the run and the node"}
		}
		sp.Tenant = tenant
		if err := sp.Normalize(n.cfg.Defaults, now); err != nil {
			return nil, prefixed(i, err)
		}
		def.Nodes[i] = queue.DAGNodeDef{ID: nd.ID, DependsOn: nd.DependsOn, TriggerRule: rule, Task: compactJSON(nd.Task)}
	}
	for i, nd := range req.Nodes {
		seen := make(map[string]bool, len(nd.DependsOn))
		for j, dep := range nd.DependsOn {
			f := nodeField(i, fmt.Sprintf("depends_on[%d]", j))
			if _, ok := index[dep]; !ok {
				return nil, &task.FieldError{Field: f, Msg: fmt.Sprintf("node %q depends on unknown node %q", nd.ID, dep)}
			}
			if seen[dep] {
				return nil, &task.FieldError{Field: f, Msg: fmt.Sprintf("node %q lists %q twice", nd.ID, dep)}
			}
			seen[dep] = true
		}
	}
	if _, cycle := topoOrder(def.Nodes); cycle != nil {
		return nil, &task.FieldError{Field: "nodes", Msg: "cycle: " + strings.Join(cycle, " -> ")}
	}
	def.ID = n.store.NewID(rand.IntN(n.store.Options().Shards), now)
	used := make(map[string]bool, len(def.Nodes))
	for i := range def.Nodes {
		// 30 bits of hash: two nodes of one run collide about once in 2 000
		// runs of 1 000 nodes; the next salt settles it.
		for salt := 0; ; salt++ {
			id, err := queue.DAGTaskID(def.ID, def.Nodes[i].ID, salt)
			if err != nil {
				return nil, err
			}
			if !used[id] {
				used[id] = true
				def.Nodes[i].TaskID = id
				break
			}
		}
	}
	return def, nil
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// topoOrder returns node indexes upstream first (Kahn, ties in input
// order), or a cycle as node ids in execution order, its first node
// repeated at the end. Every depends_on must name a node.
func topoOrder(nodes []queue.DAGNodeDef) (order []int, cycle []string) {
	index := make(map[string]int, len(nodes))
	for i, nd := range nodes {
		index[nd.ID] = i
	}
	pending := make([]int, len(nodes)) // unsettled upstream count
	down := make([][]int, len(nodes))
	for i, nd := range nodes {
		pending[i] = len(nd.DependsOn)
		for _, dep := range nd.DependsOn {
			down[index[dep]] = append(down[index[dep]], i)
		}
	}
	var ready []int
	for i := range nodes {
		if pending[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, d := range down[i] {
			if pending[d]--; pending[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	if len(order) == len(nodes) {
		return order, nil
	}
	// Every node left has an upstream that is left too: walking upstream
	// from any of them must come back to a node already walked.
	start := -1
	for i := range nodes {
		if pending[i] > 0 {
			start = i
			break
		}
	}
	walked := map[int]int{}
	var path []int
	for cur := start; ; {
		if at, ok := walked[cur]; ok {
			path = path[at:]
			break
		}
		walked[cur] = len(path)
		path = append(path, cur)
		for _, dep := range nodes[cur].DependsOn {
			if j := index[dep]; pending[j] > 0 {
				cur = j
				break
			}
		}
	}
	// The walk went upstream; show it downstream, from its earliest node.
	slices.Reverse(path)
	first := 0
	for k, i := range path {
		if i < path[first] {
			first = k
		}
	}
	for k := range path {
		cycle = append(cycle, nodes[path[(first+k)%len(path)]].ID)
	}
	return nil, append(cycle, cycle[0])
}

// CreateDAG validates and stores a DAG run in this region (its home) and
// releases its root nodes. The request's tenant is settled by the caller.
func (n *Node) CreateDAG(ctx context.Context, req *DAGRequest) (*DAGStatus, error) {
	def, err := n.planDAG(req, n.cfg.Now())
	if err != nil {
		return nil, err
	}
	initial := map[string]queue.DAGNode{}
	var roots []string
	for _, nd := range def.Nodes {
		if len(nd.DependsOn) == 0 {
			initial[nd.ID] = queue.DAGNode{State: queue.NodeReleased}
			roots = append(roots, nd.ID)
		}
	}
	if err := n.store.CreateDAG(ctx, def, initial); err != nil {
		return nil, err
	}
	dagMetrics.runs.WithLabelValues(n.cfg.Region, string(queue.DAGRunning)).Inc()
	dagMetrics.released.WithLabelValues(n.cfg.Region).Add(float64(len(roots)))
	n.log.Info("DAG run accepted", "dag", def.ID, "name", def.Name, "tenant", def.Tenant, "nodes", len(def.Nodes), "roots", len(roots))
	// The roots are RELEASED from birth; should this submit fail, the
	// reconciler finds their tasks missing and submits them.
	if _, err := n.releaseDAGNodes(ctx, def, roots); err != nil {
		n.log.Warn("DAG roots not submitted yet; the reconciler will", "dag", def.ID, "err", err)
	}
	st := &DAGStatus{ID: def.ID, Name: def.Name, Tenant: def.Tenant, Region: n.cfg.Region, State: queue.DAGRunning,
		CreatedAt: mustParseID(def.ID).Time, Nodes: make([]DAGNodeStatus, len(def.Nodes))}
	for i, nd := range def.Nodes {
		s := queue.NodeWaiting
		if len(nd.DependsOn) == 0 {
			s = queue.NodeReleased
		}
		st.Nodes[i] = DAGNodeStatus{ID: nd.ID, DependsOn: nd.DependsOn, TriggerRule: nd.TriggerRule, State: s, TaskID: nd.TaskID}
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
// its release. invalid names the nodes whose spec no longer validates (the
// region's defaults changed since the run was accepted); they are not
// submitted.
func (n *Node) releaseDAGNodes(ctx context.Context, def *queue.DAGDef, nodes []string) (invalid map[string]error, err error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	now := n.cfg.Now()
	byID := make(map[string]*queue.DAGNodeDef, len(def.Nodes))
	for i := range def.Nodes {
		byID[def.Nodes[i].ID] = &def.Nodes[i]
	}
	tasks := make([]queue.NewTask, 0, len(nodes))
	for _, id := range nodes {
		nd := byID[id]
		sp, err := task.DecodeSpec(nd.Task)
		if err == nil {
			sp.Tenant = def.Tenant
			err = sp.Normalize(n.cfg.Defaults, now)
		}
		if err != nil {
			if invalid == nil {
				invalid = map[string]error{}
			}
			invalid[id] = err
			continue
		}
		tasks = append(tasks, queue.NewTask{ID: nd.TaskID, Spec: sp})
	}
	if len(tasks) == 0 {
		return invalid, nil
	}
	res, err := n.store.Submit(ctx, tasks...)
	if err != nil {
		return nil, fmt.Errorf("release DAG %s nodes: %w", def.ID, err)
	}
	for k, r := range res {
		switch {
		case r.Err == nil:
			n.metrics.submitted.WithLabelValues(n.cfg.Region, def.Tenant, tasks[k].Spec.Type).Inc()
		case errors.Is(r.Err, task.ErrExists):
		default:
			return nil, fmt.Errorf("release DAG %s task %s: %w", def.ID, r.ID, r.Err)
		}
	}
	if n.cell != nil {
		n.cell.Wake() // places them now when this server leads the region
	}
	return invalid, nil
}

// dagHome is the home region a DAG run id names, where its state lives;
// ErrDAGNotFound for an id that is not one, or for another region's run
// asked of a forwarded request (one forward at most).
func (n *Node) dagHome(id string, hops int) (string, error) {
	p, err := task.ParseID(id)
	if err != nil || p.Region != n.cfg.Region && hops > 0 {
		return "", fmt.Errorf("%w: %s", queue.ErrDAGNotFound, id)
	}
	return p.Region, nil
}

// DAG returns a DAG run wherever it lives: from this region's store when
// it is home, else from its home region (named in the id) through one
// forward. Tenant checks are the caller's.
func (n *Node) DAG(ctx context.Context, id string, hops int) (*DAGStatus, error) {
	home, err := n.dagHome(id, hops)
	if err != nil {
		return nil, err
	}
	if home != n.cfg.Region {
		var st DAGStatus
		if err := n.proxy(ctx, home, http.MethodGet, "/v1/dags/"+url.PathEscape(id), nil, &st); err != nil {
			return nil, err
		}
		return &st, nil
	}
	def, err := n.store.DAGDefinition(ctx, id)
	if err != nil {
		return nil, err
	}
	run, err := n.store.DAG(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &DAGStatus{ID: id, Name: def.Name, Tenant: def.Tenant, Region: n.cfg.Region, State: run.State,
		CreatedAt: run.CreatedAt, FinishedAt: run.FinishedAt, CancelRequestedAt: run.CancelRequestedAt,
		CancelRequestedBy: run.CanceledBy, Nodes: make([]DAGNodeStatus, len(def.Nodes))}
	var live []string
	for _, nd := range def.Nodes {
		if run.Nodes[nd.ID].State == queue.NodeReleased {
			live = append(live, nd.TaskID)
		}
	}
	tasks := n.dagTasks(ctx, live)
	for i, nd := range def.Nodes {
		rec := run.Nodes[nd.ID]
		ns := DAGNodeStatus{ID: nd.ID, DependsOn: nd.DependsOn, TriggerRule: nd.TriggerRule, State: rec.State,
			Reason: rec.Reason, TaskID: nd.TaskID, Region: rec.Region, Pool: rec.Pool, Attempts: rec.Attempts}
		if !rec.At.IsZero() {
			at := rec.At
			ns.UpdatedAt = &at
		}
		switch rec.State {
		case queue.NodeReleased:
			if r := tasks[nd.TaskID]; r.task != nil {
				ns.TaskState, ns.Region, ns.Pool, ns.Attempts = r.task.State, r.task.HeldBy, r.task.Pool, r.task.Attempts
				if r.task.State == task.HandedOff {
					ns.Region = r.task.HandedOffTo
				}
			}
		case queue.NodeSuccess:
			ns.TaskState = task.Success
		case queue.NodeFailed:
			if rec.Reason != reasonInvalidSpec {
				ns.TaskState = task.Failed
			}
		case queue.NodeCanceled:
			if !neverSubmitted(rec) {
				ns.TaskState = task.Canceled
			}
		}
		st.Nodes[i] = ns
	}
	return st, nil
}

// dagTask is one task read for a DAG node: the task or why not.
type dagTask struct {
	task *task.Task
	err  error
}

// dagTaskParallel bounds the calls about a run's tasks made at once (they
// may live in other regions: one call each).
const dagTaskParallel = 16

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

// dagTasks reads tasks wherever they run (Node.Get forwards), a few at a
// time.
func (n *Node) dagTasks(ctx context.Context, ids []string) map[string]dagTask {
	out := make(map[string]dagTask, len(ids))
	var mu sync.Mutex
	eachID(ids, dagTaskParallel, func(id string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t, err := n.Get(cctx, id, 0)
		cancel()
		mu.Lock()
		out[id] = dagTask{task: t, err: err}
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
// cancelled (queue.Store.CancelDAG records no region).
func canceledWaiting(rec queue.DAGNode) bool {
	return rec.State == queue.NodeCanceled && rec.Reason == task.ReasonCanceledByUser && rec.Region == ""
}

// forTenant is the query parameter by which a forwarding server passes its
// caller's tenant with a cancel (cluster-token calls only, like onBehalfOf):
// the home region then cancels only a run of that tenant.
const forTenant = "for_tenant"

// CancelDAG cancels a DAG run wherever it lives: at home, or through one
// forward to the home region named in the id (as DAG reads do). At home it
// records the request and moves every WAITING node to CANCELED
// (CANCELED_BY_USER) in one script (queue.Store.CancelDAG), then asks every
// released node's task to stop through the task cancel path (Act: PENDING
// and READY end CANCELED at once, RUNNING gets a cancel request, a task
// handed off is reached where it is). What did not get through now — a
// region unreachable — the leader's reconciler asks again; it records every
// node's outcome and ends the run CANCELED once all settled. A repeat, or a
// cancel of a run that ended, changes nothing. tenant, when not "", must be
// the run's: another tenant's run is queue.ErrDAGNotFound and untouched. by
// is recorded as who asked. The run is returned as DAG returns it.
func (n *Node) CancelDAG(ctx context.Context, id, tenant, by string, hops int) (*DAGStatus, error) {
	home, err := n.dagHome(id, hops)
	if err != nil {
		return nil, err
	}
	if home != n.cfg.Region {
		q := url.Values{onBehalfOf: {by}}
		if tenant != "" {
			q.Set(forTenant, tenant)
		}
		var st DAGStatus
		path := "/v1/dags/" + url.PathEscape(id) + "/cancel?" + q.Encode()
		if err := n.proxy(ctx, home, http.MethodPost, path, nil, &st); err != nil {
			return nil, err
		}
		return &st, nil
	}
	c, err := n.store.CancelDAG(ctx, id, tenant, by)
	if err != nil {
		return nil, err
	}
	if c.First {
		n.log.Info("DAG run cancel requested", "dag", id, "by", by, "waiting_canceled", c.Canceled)
	}
	if c.State == queue.DAGRunning {
		def, err := n.store.DAGDefinition(ctx, id)
		if err != nil {
			return nil, err
		}
		run, err := n.store.DAG(ctx, id)
		if err != nil {
			return nil, err
		}
		// Every released task, and the derived id of every node cancelled
		// while WAITING: a release the cancel overtook may have submitted it.
		var ids []string
		for _, nd := range def.Nodes {
			rec := run.Nodes[nd.ID]
			if rec.State == queue.NodeReleased || canceledWaiting(rec) {
				ids = append(ids, nd.TaskID)
			}
		}
		if err := n.cancelDAGTasks(ctx, ids, by); err != nil {
			// The request is recorded: the leader's reconciler asks again.
			n.log.Warn("DAG cancel: some tasks not reached yet; the reconciler will retry", "dag", id, "err", err)
		}
	}
	return n.DAG(ctx, id, hops)
}

// cancelDAGTasks cancels tasks of a DAG run, wherever each is held, a few at
// a time, through the task cancel path (Act), as by. Tasks that are missing
// or already ended count as done; it returns the first other error.
func (n *Node) cancelDAGTasks(ctx context.Context, ids []string, by string) error {
	// The run's home is the origin of these calls whoever asked: a task is
	// at most one forward away from here.
	ctx = withHops(ctx, 0)
	var mu sync.Mutex
	var first error
	eachID(ids, dagTaskParallel, func(id string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := n.Act(cctx, OpCancel, id, 0, by, 0)
		cancel()
		var te *task.TransitionError
		var pe *PeerError
		switch {
		case err == nil, errors.Is(err, task.ErrNotFound), errors.As(err, &te):
			return
		case errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusConflict):
			return // the region that holds it says so: missing, or ended
		}
		mu.Lock()
		if first == nil {
			first = fmt.Errorf("cancel task %s: %w", id, err)
		}
		mu.Unlock()
	})
	return first
}

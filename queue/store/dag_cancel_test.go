package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// TestDAGCancel drives dag_cancel.lua and its interplay with dag_update.lua
// by hand: a cancel settles every WAITING node at once and for good, leaves
// released nodes to their tasks, is idempotent, is scoped by tenant, and
// the leader's update then ends the run CANCELED. The released node's task
// goes through the ordinary task cancel path, whose trail stays legal.
func TestDAGCancel(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.RetainCanceled = 3 * time.Hour })
	// a → b → c, and d → e with d already settled: a is RELEASED and its
	// task runs; b, c and e are WAITING.
	def := e.dagDef("a", "b:a", "c:b", "d", "e:d")
	if err := e.s.CreateDAG(e.ctx, def, map[string]queue.DAGNode{
		"a": {State: task.NodeReleased}, "d": {State: task.NodeSuccess, Reason: task.ReasonCompleted, Attempts: 1, Region: "eu-west", Pool: "cpu"},
	}); err != nil {
		t.Fatal(err)
	}
	taskA := def.Nodes[0].TaskID
	if res, err := e.s.Submit(e.ctx, queue.NewTask{ID: taskA, Spec: e.spec(), Pool: "cpu", Pinned: true}); err != nil || res[0].Err != nil {
		t.Fatalf("submit a's task: %v %v", err, res)
	}
	running := e.claimOne("cpu")

	// Another tenant's cancel finds nothing, and changes nothing.
	if _, err := e.s.CancelDAG(e.ctx, def.ID, "globex", "mallory"); !errors.Is(err, queue.ErrDAGNotFound) {
		t.Fatalf("another tenant's cancel: %v, want ErrDAGNotFound", err)
	}
	if run := e.dag(def.ID); run.CancelRequestedAt != nil || run.Nodes["b"].State != task.NodeWaiting {
		t.Fatalf("another tenant's cancel changed the run: %+v", run)
	}
	if _, err := e.s.CancelDAG(e.ctx, e.s.NewID(0, e.clock.Now()), "", "op"); !errors.Is(err, queue.ErrDAGNotFound) {
		t.Fatalf("unknown run: %v, want ErrDAGNotFound", err)
	}

	asked := e.clock.Now()
	c, err := e.s.CancelDAG(e.ctx, def.ID, "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !c.First || c.Canceled != 3 || c.State != task.DAGRunning || c.RequestedAt == nil || !c.RequestedAt.Equal(asked) {
		t.Fatalf("first cancel: %+v", c)
	}
	run := e.dag(def.ID)
	if run.CancelRequestedAt == nil || !run.CancelRequestedAt.Equal(asked) || run.CanceledBy != "alice" || run.State != task.DAGRunning {
		t.Fatalf("run after the cancel: %+v", run)
	}
	want := map[string]queue.DAGNode{
		"a": {State: task.NodeReleased},
		"b": {State: task.NodeCanceled, Reason: task.ReasonCanceledByUser},
		"c": {State: task.NodeCanceled, Reason: task.ReasonCanceledByUser},
		"d": {State: task.NodeSuccess, Reason: task.ReasonCompleted, Attempts: 1, Region: "eu-west", Pool: "cpu"},
		"e": {State: task.NodeCanceled, Reason: task.ReasonCanceledByUser},
	}
	e.wantNodes(run, want)

	// Again, later, by someone else: nothing changes.
	e.clock.Advance(time.Minute)
	again, err := e.s.CancelDAG(e.ctx, def.ID, "", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if again.First || again.Canceled != 0 || again.State != task.DAGRunning || !again.RequestedAt.Equal(asked) {
		t.Fatalf("second cancel: %+v", again)
	}
	if r := e.dag(def.ID); r.CanceledBy != "alice" || !r.CancelRequestedAt.Equal(asked) {
		t.Fatalf("second cancel rewrote the request: %+v", r)
	}
	e.wantNodes(e.dag(def.ID), want)

	// A leader's pass that read b WAITING before the cancel cannot release
	// it: the node moved on. Nor can any step release a node of a cancelled
	// run, even one found WAITING (the guard behind the compare-and-set).
	up, err := e.s.UpdateDAG(e.ctx, leader, def.ID, []queue.DAGStep{{Node: "b", From: task.NodeWaiting, To: queue.DAGNode{State: task.NodeReleased}}})
	if err != nil {
		t.Fatal(err)
	}
	if up.Applied != 0 || up.Released != 0 || up.Ended || !up.Canceling {
		t.Fatalf("stale release: %+v", up)
	}
	if err := e.rdb.HSet(e.ctx, e.s.DagKey(def.ID, "nodes"), "c", "W||0|||1").Err(); err != nil {
		t.Fatal(err)
	}
	up, err = e.s.UpdateDAG(e.ctx, leader, def.ID, []queue.DAGStep{{Node: "c", From: task.NodeWaiting, To: queue.DAGNode{State: task.NodeReleased}}})
	if err != nil || up.Applied != 0 || up.Released != 0 {
		t.Fatalf("release of a cancelled run's WAITING node: %+v %v", up, err)
	}
	if _, err := e.s.CancelDAG(e.ctx, def.ID, "", "op"); err != nil { // settles c again
		t.Fatal(err)
	}

	// The released node's task is cancelled the ordinary way: RUNNING gets a
	// request, the worker acknowledges it, the task ends CANCELED.
	if st, err := e.s.Cancel(e.ctx, taskA, task.ReasonCanceledByUser, "alice"); err != nil || st != task.Running {
		t.Fatalf("cancel a's task: %s %v", st, err)
	}
	if st, err := e.s.Cancel(e.ctx, taskA, task.ReasonCanceledByUser, "alice"); err != nil || st != task.Running {
		t.Fatalf("cancel a's task again: %s %v", st, err)
	}
	if st, _, err := e.s.Fail(e.ctx, queue.Failure{ID: taskA, Token: running.LeaseToken, Error: "context canceled"}); err != nil || st != task.Canceled {
		t.Fatalf("worker's ack: %s %v", st, err)
	}
	e.legalTrail(taskA, task.Running, task.Canceled)

	// The leader records a's outcome: every node settled, the run ends
	// CANCELED and expires after the retention of cancellations.
	tk, err := e.s.Get(e.ctx, taskA)
	if err != nil {
		t.Fatal(err)
	}
	outcome := queue.DAGNode{State: task.NodeCanceled, Reason: tk.Reason, Attempts: tk.Attempts, Region: tk.HeldBy, Pool: tk.Pool}
	up, err = e.s.UpdateDAG(e.ctx, leader, def.ID, []queue.DAGStep{{Node: "a", From: task.NodeReleased, To: outcome}})
	if err != nil {
		t.Fatal(err)
	}
	if up.Applied != 1 || !up.Ended || up.State != task.DAGCanceled {
		t.Fatalf("recording a: %+v", up)
	}
	run = e.dag(def.ID)
	if run.State != task.DAGCanceled || run.FinishedAt == nil {
		t.Fatalf("ended run: %+v", run)
	}
	want["a"] = outcome
	e.wantNodes(run, want)
	for _, k := range []string{"def", "run", "nodes", "fence:region"} {
		ttl, err := e.rdb.PTTL(e.ctx, e.s.DagKey(def.ID, k)).Result()
		if err != nil || ttl <= 2*time.Hour || ttl > 3*time.Hour {
			t.Errorf("%s expires in %v (%v), want the retention of cancellations", k, ttl, err)
		}
	}
	// A cancel of the ended run answers what is.
	late, err := e.s.CancelDAG(e.ctx, def.ID, "", "bob")
	if err != nil || late.First || late.Canceled != 0 || late.State != task.DAGCanceled || !late.RequestedAt.Equal(asked) {
		t.Fatalf("cancel after the end: %+v %v", late, err)
	}
}

// TestDAGCancelEnds: a cancel that settles the last unsettled nodes leaves
// the end to the leader, whose update ends the run without a step; a run
// that ended on its own is not marked by a later cancel.
func TestDAGCancelEnds(t *testing.T) {
	e := newEnv(t)
	def := e.dagDef("a", "b:a")
	if err := e.s.CreateDAG(e.ctx, def, map[string]queue.DAGNode{"a": {State: task.NodeFailed, Reason: task.ReasonNonRetryable, Region: "eu-west"}}); err != nil {
		t.Fatal(err)
	}
	c, err := e.s.CancelDAG(e.ctx, def.ID, "", "op")
	if err != nil || !c.First || c.Canceled != 1 || c.State != task.DAGRunning {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	up, err := e.s.UpdateDAG(e.ctx, leader, def.ID, nil)
	if err != nil || !up.Ended || up.State != task.DAGCanceled || up.Applied != 0 {
		t.Fatalf("update without steps: %+v %v", up, err)
	}
	if up, err := e.s.UpdateDAG(e.ctx, leader, def.ID, nil); err != nil || up.Ended || up.State != task.DAGCanceled {
		t.Fatalf("again: %+v %v", up, err)
	}

	done := e.dagDef("x")
	if err := e.s.CreateDAG(e.ctx, done, map[string]queue.DAGNode{"x": {State: task.NodeReleased}}); err != nil {
		t.Fatal(err)
	}
	up, err = e.s.UpdateDAG(e.ctx, leader, done.ID, []queue.DAGStep{{Node: "x", From: task.NodeReleased, To: queue.DAGNode{State: task.NodeSuccess, Reason: task.ReasonCompleted}}})
	if err != nil || !up.Ended || up.State != task.DAGSuccess || up.Canceling {
		t.Fatalf("x: %+v %v", up, err)
	}
	c, err = e.s.CancelDAG(e.ctx, done.ID, "", "op")
	if err != nil || c.First || c.State != task.DAGSuccess || c.RequestedAt != nil {
		t.Fatalf("cancel of a run that succeeded: %+v %v", c, err)
	}
	if run := e.dag(done.ID); run.State != task.DAGSuccess || run.CancelRequestedAt != nil || run.CanceledBy != "" {
		t.Fatalf("the ended run was marked: %+v", run)
	}
	// Without a cancel, an update with no step changes nothing.
	plain := e.dagDef("p", "q:p")
	if err := e.s.CreateDAG(e.ctx, plain, map[string]queue.DAGNode{"p": {State: task.NodeReleased}}); err != nil {
		t.Fatal(err)
	}
	if up, err := e.s.UpdateDAG(e.ctx, leader, plain.ID, nil); err != nil || up.Ended || up.State != task.DAGRunning || up.Canceling {
		t.Fatalf("update without steps nor cancel: %+v %v", up, err)
	}
}

// dagDef is a definition of tenant acme from "node:dep1,dep2" strings, with
// derived task ids.
func (e *env) dagDef(nodes ...string) *queue.DAGDef {
	e.t.Helper()
	e.clock.Advance(time.Millisecond) // a fresh id each call
	def := &queue.DAGDef{ID: e.s.NewID(0, e.clock.Now()), Tenant: "acme"}
	for _, spec := range nodes {
		nd := queue.DAGNodeDef{TriggerRule: task.AllSuccess, Task: []byte(`{"type":"test.noop"}`)}
		id, deps, _ := strings.Cut(spec, ":")
		nd.ID = id
		if deps != "" {
			nd.DependsOn = strings.Split(deps, ",")
		}
		tid, err := queue.DAGTaskID(def.ID, id, 0)
		if err != nil {
			e.t.Fatal(err)
		}
		nd.TaskID = tid
		def.Nodes = append(def.Nodes, nd)
	}
	return def
}

func (e *env) dag(id string) *queue.DAGRun {
	e.t.Helper()
	run, err := e.s.DAG(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

// wantNodes compares every node's recorded state (its time aside).
func (e *env) wantNodes(run *queue.DAGRun, want map[string]queue.DAGNode) {
	e.t.Helper()
	for id, w := range want {
		got := run.Nodes[id]
		if got.At.IsZero() {
			e.t.Errorf("node %s has no time", id)
		}
		got.At = time.Time{}
		if got != w {
			e.t.Errorf("node %s: %+v, want %+v", id, got, w)
		}
	}
}

// legalTrail checks every step of a task's trail against the transition
// table, and that it holds the step from → to.
func (e *env) legalTrail(id string, from, to task.State) {
	e.t.Helper()
	tr, err := e.s.Trail(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	seen := false
	for _, x := range tr {
		if !task.Legal(x.From, x.To, x.Reason) {
			e.t.Errorf("illegal transition in %s's trail: %+v", id, x)
		}
		seen = seen || x.From == from && x.To == to
	}
	if !seen {
		e.t.Errorf("%s's trail lacks %s → %s: %+v", id, from, to, tr)
	}
}

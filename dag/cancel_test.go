package dag

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDAGCancel cancels DAG runs in the three-region federation of the DAG
// tests, with real workers (the worker SDK) whose handlers see the cancel.
func TestDAGCancel(t *testing.T) {
	e := newDAGEnv(t, nil)
	home := e.r("us-east-1")
	w := startCancelWorkers(t, e, map[string]int{"eu-west-1": 1})
	e.waitReady()

	t.Run("a run across regions stops; waiting nodes never run", func(t *testing.T) { testDAGCancelRun(t, e, home, w) })
	t.Run("who may cancel", func(t *testing.T) { testDAGCancelAuth(t, e, home, w) })
	t.Run("unknown and ended runs", func(t *testing.T) { testDAGCancelEnded(t, e, home) })
	t.Run("listing (GET /v1/dags)", func(t *testing.T) { testDAGList(t, e) })
}

// testDAGCancelRun: a run with a RUNNING node in eu-west-1 (its handler
// waits for its context), a RUNNING node in ap-south-1 whose handler ignores
// the cancel and completes late, a released node READY behind the first in
// eu-west-1 (one slot there), a released node PENDING for an hour, and
// WAITING nodes of every trigger rule. It is cancelled from ap-south-1, which
// forwards home.
func testDAGCancelRun(t *testing.T, e *dagEnv, home *dagRegion, w *cancelWorkers) {
	rule := func(n map[string]any, r task.TriggerRule) map[string]any { n["trigger_rule"] = string(r); return n }
	later := dagNode("later", "ok", "ap-south-1")
	later["task"].(map[string]any)["delay"] = "1h"
	nodes := []map[string]any{
		dagNode("slow", "hold", "eu-west-1"),
		dagNode("stubborn", "stubborn", "ap-south-1"),
		dagNode("gate", "gate", "us-east-1"),
		dagNode("queued", "ok", "eu-west-1", "gate"),
		later,
		dagNode("w1", "ok", "", "slow"),
		dagNode("w2", "ok", "", "stubborn"), // its upstream completes after the cancel
		rule(dagNode("w3", "ok", "", "queued"), task.AllDone),
		rule(dagNode("w4", "ok", "", "slow"), task.OneFailed), // slow ends CANCELED: would run without the cancel
		rule(dagNode("w5", "ok", "", "w1"), task.OneFailed),
	}
	var created apiv1.DAGStatus
	e.submitDAG(home.any(), dagTokAcme, map[string]any{"name": "to-cancel", "nodes": nodes}).Want(t, http.StatusCreated).JSON(t, &created)
	id := created.ID
	taskOf := map[string]string{}
	for _, nd := range created.Nodes {
		taskOf[nd.ID] = nd.TaskID
	}
	w.waitStarted(t, taskOf["slow"], taskOf["stubborn"], taskOf["gate"])
	close(w.gate)
	// queued is released once gate succeeded, and waits READY behind slow.
	fedtest.Eventually(t, 20*time.Second, "queued READY in eu-west-1 and later PENDING", func() bool {
		st := e.getDAG(home.any(), dagTokAcme, id)
		n := nodeByID(st)
		return n["queued"].TaskState == task.Ready && n["queued"].Region == "eu-west-1" &&
			n["later"].TaskState == task.Pending && n["slow"].TaskState == task.Running && n["stubborn"].TaskState == task.Running
	})

	away := e.r("ap-south-1").any()
	cancelURL := func(s *dagServer) string { return s.http.URL + "/v1/dags/" + id + "/cancel" }

	// Submitters may not cancel (an operator action, as for tasks), not
	// even their own tenant's run; nothing changes.
	for _, tok := range []string{dagTokGlobex, dagTokAcme} {
		for _, s := range []*dagServer{home.any(), away} {
			rep := e.call(http.MethodPost, cancelURL(s), tok, nil).Want(t, http.StatusForbidden)
			fedtest.CheckErrorShape(t, "submitter cancel", rep)
		}
	}
	if st := e.getDAG(home.any(), dagTokAcme, id); st.CancelRequestedAt != nil || nodeByID(st)["w1"].State != task.NodeWaiting {
		t.Fatalf("another tenant's cancel changed the run: %+v", st)
	}

	// The tenant's operator, through a server of another region.
	asked := time.Now()
	var got apiv1.DAGStatus
	e.call(http.MethodPost, cancelURL(away), dagTokAcmeOps, nil).Want(t, http.StatusOK).JSON(t, &got)
	if got.ID != id || got.Region != home.name || got.CancelRequestedAt == nil || got.CancelRequestedBy != "acme-ops" {
		t.Fatalf("cancel answer: %+v", got)
	}
	if got.State != task.DAGRunning && got.State != task.DAGCanceled {
		t.Fatalf("cancel answer state %s", got.State)
	}
	n := nodeByID(got)
	for _, wn := range []string{"w1", "w2", "w3", "w4", "w5"} {
		if nd := n[wn]; nd.State != task.NodeCanceled || nd.Reason != task.ReasonCanceledByUser || nd.TaskState != "" {
			t.Errorf("answer: waiting node %s is %s %s task %q; want CANCELED CANCELED_BY_USER without a task", wn, nd.State, nd.Reason, nd.TaskState)
		}
	}
	// READY and PENDING tasks end at once, before the answer.
	for _, cn := range []string{"queued", "later"} {
		if nd := n[cn]; nd.TaskState != task.Canceled {
			t.Errorf("answer: node %s task %s, want CANCELED at once", cn, nd.TaskState)
		}
	}

	// The running handlers are told: slow stops on its context, stubborn
	// completes anyway (a late completion of w2's upstream).
	fedtest.Eventually(t, 15*time.Second, "both running handlers see their context end", func() bool {
		return w.cause(taskOf["slow"]) != nil && w.cause(taskOf["stubborn"]) != nil
	})
	if c := w.cause(taskOf["slow"]); !errors.Is(c, worker.ErrCanceled) {
		t.Errorf("slow's handler context ended with %v, want worker.ErrCanceled", c)
	}
	st := e.waitDAG(home, id, 30*time.Second)
	if st.State != task.DAGCanceled || st.FinishedAt == nil || st.CancelRequestedAt == nil || st.CancelRequestedAt.Before(asked.Add(-time.Second)) {
		t.Fatalf("run ended %s: %+v", st.State, st)
	}
	want := map[string]struct {
		state  task.NodeState
		reason string
		task   task.State
		region string
	}{
		"slow":     {task.NodeCanceled, task.ReasonCanceledByUser, task.Canceled, "eu-west-1"},
		"stubborn": {task.NodeSuccess, task.ReasonCompleted, task.Success, "ap-south-1"},
		"gate":     {task.NodeSuccess, task.ReasonCompleted, task.Success, "us-east-1"},
		"queued":   {task.NodeCanceled, task.ReasonCanceledByUser, task.Canceled, "eu-west-1"},
		"later":    {task.NodeCanceled, task.ReasonCanceledByUser, task.Canceled, home.name},
		"w1":       {task.NodeCanceled, task.ReasonCanceledByUser, "", ""},
		"w2":       {task.NodeCanceled, task.ReasonCanceledByUser, "", ""},
		"w3":       {task.NodeCanceled, task.ReasonCanceledByUser, "", ""},
		"w4":       {task.NodeCanceled, task.ReasonCanceledByUser, "", ""},
		"w5":       {task.NodeCanceled, task.ReasonCanceledByUser, "", ""},
	}
	ctx := fedtest.Ctx(t)
	for _, nd := range st.Nodes {
		wn := want[nd.ID]
		if nd.State != wn.state || nd.Reason != wn.reason || nd.TaskState != wn.task || nd.Region != wn.region {
			t.Errorf("node %s: %s %s task %q in %q; want %s %s task %q in %q", nd.ID, nd.State, nd.Reason, nd.TaskState, nd.Region,
				wn.state, wn.reason, wn.task, wn.region)
		}
		if wn.task == "" {
			for _, name := range dagRegions {
				if _, err := e.r(name).store.Get(ctx, nd.TaskID); !errors.Is(err, task.ErrNotFound) {
					t.Errorf("node %s: %s holds its task (%v)", nd.ID, name, err)
				}
			}
			continue
		}
		// Every task's trail, home part and receiver's, is legal.
		var tr struct{ Transitions []task.Transition }
		e.call(http.MethodGet, home.any().http.URL+"/v1/tasks/"+nd.TaskID+"/trail", dagTokAdmin, nil).Want(t, http.StatusOK).JSON(t, &tr)
		for _, x := range tr.Transitions {
			if !task.Legal(x.From, x.To, x.Reason) {
				t.Errorf("node %s: illegal step %s → %s (%s)", nd.ID, x.From, x.To, x.Reason)
			}
		}
	}
	for _, never := range []string{"queued", "later", "w1", "w2", "w3", "w4", "w5"} {
		if w.ran(taskOf[never]) {
			t.Errorf("node %s ran", never)
		}
	}
	if got := home.counter("ax_dag_runs_total", "CANCELED"); got < 1 {
		t.Errorf("ax_dag_runs_total{state=CANCELED} = %v", got)
	}

	// A second cancel, from home this time: 200 with the run as it is.
	var again apiv1.DAGStatus
	e.call(http.MethodPost, cancelURL(home.any()), dagTokAcmeOps, nil).Want(t, http.StatusOK).JSON(t, &again)
	if again.State != task.DAGCanceled || again.CancelRequestedAt == nil || !again.CancelRequestedAt.Equal(*st.CancelRequestedAt) ||
		again.FinishedAt == nil || !again.FinishedAt.Equal(*st.FinishedAt) {
		t.Fatalf("second cancel: %+v", again)
	}
	for i, nd := range again.Nodes {
		if nd.State != st.Nodes[i].State || nd.Reason != st.Nodes[i].Reason || nd.TaskState != st.Nodes[i].TaskState {
			t.Errorf("second cancel changed node %s: %+v, was %+v", nd.ID, nd, st.Nodes[i])
		}
	}
	// Nothing is released later either (the reconciler forgot the run).
	time.Sleep(3 * interval)
	for _, never := range []string{"w1", "w2", "w3", "w4", "w5"} {
		if w.ran(taskOf[never]) {
			t.Errorf("node %s ran after the run ended", never)
		}
	}
}

// testDAGCancelAuth: an operator (here the admin) cancels any tenant's run;
// a tenant-bound operator only its tenant's; a submitter (with or without a tenant)
// none (403).
func testDAGCancelAuth(t *testing.T, e *dagEnv, home *dagRegion, w *cancelWorkers) {
	hold := func(name string) apiv1.DAGStatus {
		var st apiv1.DAGStatus
		e.submitDAG(home.any(), dagTokAcme, map[string]any{"name": name, "nodes": []any{
			dagNode("hold", "hold", "ap-south-1"), dagNode("after", "ok", "", "hold")}}).Want(t, http.StatusCreated).JSON(t, &st)
		w.waitStarted(t, st.Nodes[0].TaskID)
		return st
	}
	// The admin, through another region.
	run := hold("admin-cancels")
	var got apiv1.DAGStatus
	e.call(http.MethodPost, e.r("eu-west-1").any().http.URL+"/v1/dags/"+run.ID+"/cancel", dagTokAdmin, nil).Want(t, http.StatusOK).JSON(t, &got)
	if got.CancelRequestedBy != "root" {
		t.Errorf("cancel recorded as by %q, want root", got.CancelRequestedBy)
	}
	if st := e.waitDAG(home, run.ID, 20*time.Second); st.State != task.DAGCanceled {
		t.Fatalf("admin's cancel: run ended %s", st.State)
	}

	// Operators and a tenant-less submitter, on an API of their own over a
	// home server.
	const opAcme, opGlobex, subAll = "op-acme", "op-globex", "sub-all"
	hs := home.any()
	api := httpapi.New(hs.node, httpapi.Config{Gatherer: prometheus.NewRegistry(), Pools: []string{dagPool}, DAGs: hs.runs, Auth: &httpapi.Auth{
		Enabled: true, ClusterToken: dagTokCluster, Tokens: []httpapi.Token{
			{Name: "op-acme", SHA256: httpapi.HashToken(opAcme), Role: httpapi.RoleOperator, Tenant: "acme"},
			{Name: "op-globex", SHA256: httpapi.HashToken(opGlobex), Role: httpapi.RoleOperator, Tenant: "globex"},
			{Name: "sub-all", SHA256: httpapi.HashToken(subAll), Role: httpapi.RoleSubmitter},
		}}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	run = hold("operator-cancels")
	url := srv.URL + "/v1/dags/" + run.ID + "/cancel"
	if er := e.call(http.MethodPost, url, opGlobex, nil).Want(t, http.StatusNotFound).Err(t); er.Code != "not_found" {
		t.Errorf("another tenant's operator: %+v", er)
	}
	if er := e.call(http.MethodPost, url, subAll, nil).Want(t, http.StatusForbidden).Err(t); er.Code != "permission_denied" {
		t.Errorf("a submitter without a tenant: %+v", er)
	}
	if st := e.getDAG(home.any(), dagTokAcme, run.ID); st.CancelRequestedAt != nil {
		t.Fatalf("a refused cancel changed the run: %+v", st)
	}
	if er := e.call(http.MethodPost, url, opAcme, `{"force":true}`).Want(t, http.StatusBadRequest).Err(t); er.Field != "force" {
		t.Errorf("a body with a field: %+v", er)
	}
	e.call(http.MethodPost, url, opAcme, `{}`).Want(t, http.StatusOK)
	if st := e.waitDAG(home, run.ID, 20*time.Second); st.State != task.DAGCanceled || st.CancelRequestedBy != "op-acme" {
		t.Fatalf("operator's cancel: run ended %s by %q", st.State, st.CancelRequestedBy)
	}
}

// testDAGCancelEnded: unknown ids are 404 with the error shape, wherever
// asked; a run that ended answers 200 as it is, unmarked.
func testDAGCancelEnded(t *testing.T, e *dagEnv, home *dagRegion) {
	away := e.r("eu-west-1").any()
	missing := task.NewIDGen().New(home.name, 0, time.Now())
	for _, s := range []*dagServer{home.any(), away} {
		for _, id := range []string{missing, "not-an-id"} {
			rep := e.call(http.MethodPost, s.http.URL+"/v1/dags/"+id+"/cancel", dagTokAdmin, nil).Want(t, http.StatusNotFound)
			fedtest.CheckErrorShape(t, "cancel "+id, rep)
			if er := rep.Err(t); er.Code != "not_found" || er.Field != "id" || er.Message != "no such DAG run" {
				t.Errorf("cancel %s through %s: %+v", id, s.id, er)
			}
		}
	}
	var created apiv1.DAGStatus
	e.submitDAG(home.any(), dagTokAcme, map[string]any{"nodes": []any{dagNode("quick", "ok", "")}}).Want(t, http.StatusCreated).JSON(t, &created)
	done := e.waitDAG(home, created.ID, 20*time.Second)
	if done.State != task.DAGSuccess {
		t.Fatalf("run ended %s", done.State)
	}
	var got apiv1.DAGStatus
	e.call(http.MethodPost, away.http.URL+"/v1/dags/"+created.ID+"/cancel", dagTokAcmeOps, nil).Want(t, http.StatusOK).JSON(t, &got)
	if got.State != task.DAGSuccess || got.CancelRequestedAt != nil || got.FinishedAt == nil || done.FinishedAt == nil ||
		!got.FinishedAt.Equal(*done.FinishedAt) {
		t.Fatalf("cancel of an ended run: %+v", got)
	}
}

// TestDAGCancelOvertakesRelease drives the reconciler by hand on a region
// with no leader, through the races a cancel meets: a release submitted
// just before the cancel, a release recorded just after it (a pass that read
// the run before), a late completion of an upstream, and a root whose task
// was not submitted yet. No node canceled while WAITING runs, and the run
// ends CANCELED.
func TestDAGCancelOvertakesRelease(t *testing.T) {
	runs, st, _ := leaderlessRuns(t)
	const name = "us-east-1"
	ctx := fedtest.Ctx(t)
	fence := queue.Fence{Name: "region", Token: 7}
	recon := func() *reconciler { return &reconciler{runs: runs, fence: fence, plans: map[string]*runPlan{}} }
	spec := []byte(`{"type":"ok"}`)
	created, err := runs.Create(ctx, &apiv1.DAGRequest{Tenant: "acme", Nodes: []apiv1.DAGNodeSpec{
		{ID: "a", Task: spec},
		{ID: "b", DependsOn: []string{"a"}, Task: spec},
		{ID: "c", DependsOn: []string{"a"}, Task: spec},
		{ID: "d", Task: spec},
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	taskOf := map[string]string{}
	for _, nd := range created.Nodes {
		taskOf[nd.ID] = nd.TaskID
	}
	// a runs; d waits READY.
	if _, err := st.Maintainer().Place(ctx, fence, []queue.Assignment{{ID: taskOf["a"], Pool: "cpu"}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 10})
	if err != nil || len(claimed) != 1 || claimed[0].ID != taskOf["a"] {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if _, err := st.Maintainer().Place(ctx, fence, []queue.Assignment{{ID: taskOf["d"], Pool: "cpu"}}); err != nil {
		t.Fatal(err)
	}
	def, err := st.DAGs().DAGDefinition(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// A pass submitted b's task (its release not recorded yet) when the
	// cancel arrives: the cancel withdraws it.
	if _, err := runs.release(ctx, def, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	got, err := runs.Cancel(ctx, id, "acme", "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	nodes := nodeByID(*got)
	if got.CancelRequestedAt == nil || got.State != task.DAGRunning || nodes["a"].TaskState != task.Running ||
		nodes["d"].TaskState != task.Canceled || nodes["b"].State != task.NodeCanceled || nodes["c"].State != task.NodeCanceled {
		t.Fatalf("after the cancel: %+v", got)
	}
	if tk, err := st.Get(ctx, taskOf["a"]); err != nil || !tk.CancelRequested {
		t.Fatalf("a's task: %+v %v", tk, err)
	}
	wantState := func(node string, want task.State) {
		t.Helper()
		tk, err := st.Get(ctx, taskOf[node])
		if err != nil || tk.State != want {
			t.Fatalf("%s's task: %v %v, want %s", node, tk, err, want)
		}
	}
	wantState("b", task.Canceled)

	// A pass that read the run before the cancel submits c's task and
	// records its release: refused, and it withdraws the task.
	if _, err := runs.release(ctx, def, []string{"c"}); err != nil {
		t.Fatal(err)
	}
	up, err := st.DAGs().UpdateDAG(ctx, fence, id, []queue.DAGStep{{Node: "c", From: task.NodeWaiting, To: queue.DAGNode{State: task.NodeReleased}}})
	if err != nil || up.Applied != 0 || !up.Canceling {
		t.Fatalf("stale release: %+v %v", up, err)
	}
	r := recon()
	plan, err := r.plan(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r.withdraw(ctx, id, plan, []string{"c"})
	wantState("c", task.Canceled)

	// a completes after all (its handler finished): the late completion
	// releases nothing, and the run ends CANCELED.
	if _, err := st.Claimer().Complete(ctx, queue.Completion{ID: claimed[0].ID, Token: claimed[0].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	before := counterValue(runs.metrics.runs.WithLabelValues(name, "CANCELED"))
	for range 2 {
		if err := recon().reconcile(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	run, err := st.DAGs().DAG(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != task.DAGCanceled {
		t.Fatalf("run %s: %+v", run.State, run.Nodes)
	}
	if got := counterValue(runs.metrics.runs.WithLabelValues(name, "CANCELED")) - before; got != 1 {
		t.Errorf("ax_dag_runs_total{state=CANCELED} rose by %v, want 1", got)
	}
	for node, want := range map[string]task.NodeState{"a": task.NodeSuccess, "b": task.NodeCanceled, "c": task.NodeCanceled, "d": task.NodeCanceled} {
		if run.Nodes[node].State != want {
			t.Errorf("node %s: %+v, want %s", node, run.Nodes[node], want)
		}
	}
	if due, err := st.Maintainer().DueTasks(ctx, 100); err != nil || len(due) != 0 {
		t.Errorf("tasks waiting for placement: %v %v", due, err)
	}
	for _, node := range []string{"a", "b", "c", "d"} {
		tr, err := st.Tasks().Trail(ctx, taskOf[node])
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range tr {
			if !task.Legal(x.From, x.To, x.Reason) {
				t.Errorf("%s: illegal step %+v", node, x)
			}
		}
	}

	// A root whose task was not submitted yet (the create's submit still in
	// flight) when the run is cancelled: the reconciler submits it only to
	// cancel it, so the late submit of the create finds it and runs nothing.
	def2 := &queue.DAGDef{ID: task.NewIDGen().New(name, 0, time.Now()), Tenant: "acme",
		Nodes: []queue.DAGNodeDef{{ID: "x", TriggerRule: task.AllSuccess, Task: spec}}}
	def2.Nodes[0].TaskID, _ = queue.DAGTaskID(def2.ID, "x", 0)
	if err := st.DAGs().CreateDAG(ctx, def2, map[string]queue.DAGNode{"x": {State: task.NodeReleased}}); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Cancel(ctx, def2.ID, "", "op", 0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := recon().reconcile(ctx, def2.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := runs.release(ctx, def2, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if tk, err := st.Get(ctx, def2.Nodes[0].TaskID); err != nil || tk.State != task.Canceled {
		t.Fatalf("x's task: %v %v", tk, err)
	}
	if run, err := st.DAGs().DAG(ctx, def2.ID); err != nil || run.State != task.DAGCanceled || run.Nodes["x"].State != task.NodeCanceled {
		t.Fatalf("x's run: %+v %v", run, err)
	}
}

func nodeByID(st apiv1.DAGStatus) map[string]apiv1.DAGNodeStatus {
	m := make(map[string]apiv1.DAGNodeStatus, len(st.Nodes))
	for _, nd := range st.Nodes {
		m[nd.ID] = nd
	}
	return m
}

// cancelWorkers are worker-SDK workers, one per region, whose handlers
// record what ran and how their contexts ended:
//
//	ok        succeeds at once
//	gate      waits until the test closes gate (or its context ends)
//	hold      waits for its context to end, and returns its error
//	stubborn  waits for its context to end, then succeeds anyway
type cancelWorkers struct {
	gate chan struct{}

	mu      sync.Mutex
	started map[string]bool  // task id → its handler started
	causes  map[string]error // task id → context.Cause when its context ended
}

// startCancelWorkers runs the workers until the test ends; slots[region]
// overrides the default of 8 slots.
func startCancelWorkers(t *testing.T, e *dagEnv, slots map[string]int) *cancelWorkers {
	w := &cancelWorkers{gate: make(chan struct{}), started: map[string]bool{}, causes: map[string]error{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range dagRegions {
		c := slots[name]
		if c == 0 {
			c = 8
		}
		wk, err := worker.New(e.r(name).store.Claimer(), worker.Options{Pool: dagPool, ID: "w-" + name, Concurrency: c,
			Heartbeat: 200 * time.Millisecond, ShutdownGrace: -1, Logger: discardLog()})
		if err != nil {
			t.Fatal(err)
		}
		wk.Handle("ok", func(_ context.Context, tk *worker.Task) error { w.start(tk.ID); return nil })
		wk.Handle("gate", func(ctx context.Context, tk *worker.Task) error {
			w.start(tk.ID)
			select {
			case <-w.gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		wk.Handle("hold", func(ctx context.Context, tk *worker.Task) error {
			w.start(tk.ID)
			<-ctx.Done()
			w.ended(tk.ID, context.Cause(ctx))
			return ctx.Err()
		})
		wk.Handle("stubborn", func(ctx context.Context, tk *worker.Task) error {
			w.start(tk.ID)
			<-ctx.Done()
			w.ended(tk.ID, context.Cause(ctx))
			return nil
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = wk.Run(ctx)
		}()
	}
	// Workers stop before the federation (cleanups run last-in first).
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return w
}

func (w *cancelWorkers) start(id string) {
	w.mu.Lock()
	w.started[id] = true
	w.mu.Unlock()
}

func (w *cancelWorkers) ended(id string, cause error) {
	w.mu.Lock()
	w.causes[id] = cause
	w.mu.Unlock()
}

func (w *cancelWorkers) ran(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started[id]
}

func (w *cancelWorkers) cause(id string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.causes[id]
}

func (w *cancelWorkers) waitStarted(t *testing.T, ids ...string) {
	t.Helper()
	fedtest.Eventually(t, 20*time.Second, "handlers started", func() bool {
		for _, id := range ids {
			if !w.ran(id) {
				return false
			}
		}
		return true
	})
}

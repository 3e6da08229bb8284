package dag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestDAGRuns runs DAGs through three regions, with two servers in the home
// region (us-east-1), and ends by killing the home region's leader in the
// middle of a run.
func TestDAGRuns(t *testing.T) {
	e := newDAGEnv(t, map[string]int{"us-east-1": 2})
	home := e.r("us-east-1")
	w := e.startWorkers(0)
	e.waitReady()

	t.Run("rejects invalid DAGs naming the field", func(t *testing.T) { testDAGValidation(t, e, home.any()) })
	t.Run("50 nodes run in dependency order across regions", func(t *testing.T) { testDAGFifty(t, e, home, w) })
	t.Run("a failed node cancels all_success dependents, runs all_done and one_failed", func(t *testing.T) {
		testDAGFailure(t, e, home, w)
	})
	t.Run("reads are forwarded home and tenant-scoped", func(t *testing.T) { testDAGReads(t, e, home) })
	t.Run("a node's task carries its parents' results across regions", func(t *testing.T) { testDAGParents(t, e, home, w) })
	t.Run("killing the home leader mid-run loses nothing", func(t *testing.T) {
		testenv.Slow(t)
		testDAGLeaderKill(t, e, home, w)
	})
}

func testDAGValidation(t *testing.T, e *dagEnv, s *dagServer) {
	ok := map[string]any{"type": "ok"}
	n := func(id string, deps ...string) map[string]any {
		m := map[string]any{"id": id, "task": ok}
		if len(deps) > 0 {
			m["depends_on"] = deps
		}
		return m
	}
	dag := func(nodes ...map[string]any) map[string]any { return map[string]any{"name": "v", "nodes": nodes} }
	tooMany := make([]map[string]any, apiv1.MaxDAGNodes+1)
	for i := range tooMany {
		tooMany[i] = n(fmt.Sprintf("n%d", i))
	}
	cases := []struct {
		name        string
		token       string
		body        any
		status      int
		field, want string
	}{
		{"cycle of three", dagTokAcme, dag(n("a", "c"), n("b", "a"), n("c", "b"), n("d")), 400, "nodes", "cycle: a -> b -> c -> a"},
		{"cycle behind a root", dagTokAcme, dag(n("root"), n("x", "root", "z"), n("y", "x"), n("z", "y")), 400, "nodes", "cycle: x -> y -> z -> x"},
		{"self dependency", dagTokAcme, dag(n("a", "a")), 400, "nodes", "cycle: a -> a"},
		{"unknown reference", dagTokAcme, dag(n("a"), n("b", "a", "zz")), 400, "nodes[1].depends_on[1]", `node "b" depends on unknown node "zz"`},
		{"dependency twice", dagTokAcme, dag(n("a"), n("b", "a", "a")), 400, "nodes[1].depends_on[1]", `lists "a" twice`},
		{"duplicate id", dagTokAcme, dag(n("a"), n("a")), 400, "nodes[1].id", `duplicate node id "a"`},
		{"bad id", dagTokAcme, dag(n("Extract!")), 400, "nodes[0].id", "Extract!"},
		{"no nodes", dagTokAcme, map[string]any{"nodes": []any{}}, 400, "nodes", "at least one"},
		{"too many nodes", dagTokAcme, map[string]any{"nodes": tooMany}, 400, "nodes", "at most 1000"},
		{"bad trigger rule", dagTokAcme, dag(map[string]any{"id": "a", "trigger_rule": "sometimes", "task": ok}), 400, "nodes[0].trigger_rule", "all_success, all_done or one_failed"},
		{"one_failed root", dagTokAcme, dag(map[string]any{"id": "a", "trigger_rule": "one_failed", "task": ok}), 400, "nodes[0].trigger_rule", "needs at least one depends_on"},
		{"missing task", dagTokAcme, dag(map[string]any{"id": "a"}), 400, "nodes[0].task", "is required"},
		{"invalid task field", dagTokAcme, dag(n("a"), map[string]any{"id": "b", "task": map[string]any{"type": "ok", "priority": 9}}), 400, "nodes[1].task.priority", "between 0 and 4"},
		{"region outside the federation", dagTokAcme, dag(n("a"), map[string]any{"id": "b", "task": map[string]any{"type": "ok", "regions": []string{"moon-1"}}}), 400, "nodes[1].task.regions[0]", `no region "moon-1" in the federation`},
		{"unknown task field", dagTokAcme, dag(map[string]any{"id": "a", "task": map[string]any{"type": "ok", "colour": "red"}}), 400, "nodes[0].task.colour", "unknown field"},
		{"spec inline", dagTokAcme, dag(map[string]any{"id": "a", "type": "ok"}), 400, "nodes[0].type", `goes under "task"`},
		{"parents given", dagTokAcme, dag(map[string]any{"id": "a", "task": map[string]any{"type": "ok", "parents": map[string]any{"x": "eA=="}}}), 400, "nodes[0].task.parents", "set by a DAG run"},
		{"idempotency key", dagTokAcme, dag(map[string]any{"id": "a", "task": map[string]any{"type": "ok", "idempotency_key": "k"}}), 400, "nodes[0].task.idempotency_key", "derived"},
		{"another tenant's task", dagTokAcme, dag(map[string]any{"id": "a", "task": map[string]any{"type": "ok", "tenant": "globex"}}), 400, "nodes[0].task.tenant", `"acme"`},
		{"payload too large", dagTokAcme, dag(map[string]any{"id": "a", "task": map[string]any{"type": "ok", "payload": strings.Repeat("x", 1<<20+1)}}), 413, "nodes[0].task.payload", "larger than"},
		{"another tenant's DAG", dagTokAcme, map[string]any{"tenant": "globex", "nodes": []any{n("a")}}, 403, "tenant", "acme"},
		{"unknown top-level field", dagTokAcme, map[string]any{"nodes": []any{n("a")}, "schedule": "x"}, 400, "schedule", "unknown field"},
		{"not JSON", dagTokAcme, "{nope", 400, "", "invalid JSON"},
		{"no token", "", dag(n("a")), 401, "Authorization", "bearer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := e.submitDAG(s, c.token, c.body).Want(t, c.status)
			er := rep.Err(t)
			if er.Field != c.field || !strings.Contains(er.Message, c.want) {
				t.Fatalf("error field %q message %q; want field %q and a message with %q", er.Field, er.Message, c.field, c.want)
			}
		})
	}
}

// testDAGFifty: a random 50-node DAG whose nodes are forced round-robin into
// the three regions; every node must start after each of its dependencies
// ended, and run once.
func testDAGFifty(t *testing.T, e *dagEnv, home *dagRegion, w *dagWorkers) {
	rng := rand.New(rand.NewPCG(6, 3))
	var nodes []map[string]any
	deps := map[string][]string{}
	for i := range 50 {
		id := fmt.Sprintf("n%02d", i)
		var ds []string
		if i > 0 {
			picked := map[string]bool{}
			for range rng.IntN(4) {
				d := fmt.Sprintf("n%02d", max(0, i-1-rng.IntN(8)))
				if !picked[d] {
					picked[d] = true
					ds = append(ds, d)
				}
			}
		}
		deps[id] = ds
		nodes = append(nodes, dagNode(id, "ok", dagRegions[i%3], ds...))
	}
	start := time.Now()
	var created apiv1.DAGStatus
	e.submitDAG(home.any(), dagTokAcme, map[string]any{"name": "fifty", "nodes": nodes}).Want(t, http.StatusCreated).JSON(t, &created)
	if created.State != task.DAGRunning || len(created.Nodes) != 50 || created.Region != home.name {
		t.Fatalf("created: %+v", created)
	}
	if p, err := task.ParseID(created.ID); err != nil || p.Region != home.name {
		t.Fatalf("DAG id %q does not name its home region: %v", created.ID, err)
	}
	st := e.waitDAG(home, created.ID, 45*time.Second)
	t.Logf("50-node DAG ran in %v", time.Since(start).Round(time.Millisecond))
	if st.State != task.DAGSuccess {
		t.Fatalf("DAG ended %s: %+v", st.State, st.Nodes)
	}
	taskOf := map[string]string{}
	regionsUsed := map[string]bool{}
	for i, nd := range st.Nodes {
		if nd.State != task.NodeSuccess || nd.TaskState != task.Success || nd.TaskID == "" {
			t.Fatalf("node %s: %+v", nd.ID, nd)
		}
		if want := dagRegions[i%3]; nd.Region != want || nd.Pool != dagPool {
			t.Errorf("node %s ran in %s/%s, want %s/%s", nd.ID, nd.Region, nd.Pool, want, dagPool)
		}
		if p, err := task.ParseID(nd.TaskID); err != nil || p.Region != home.name || !strings.HasPrefix(nd.TaskID, created.ID[:10]) {
			t.Errorf("node %s task id %s is not derived from the DAG id %s", nd.ID, nd.TaskID, created.ID)
		}
		taskOf[nd.ID] = nd.TaskID
		regionsUsed[nd.Region] = true
	}
	if len(regionsUsed) != 3 {
		t.Errorf("nodes ran in %v, want all three regions", regionsUsed)
	}
	for id, ds := range deps {
		runs := w.ran(taskOf[id])
		if len(runs) != 1 {
			t.Fatalf("node %s ran %d times", id, len(runs))
		}
		for _, d := range ds {
			up := w.ran(taskOf[d])
			if len(up) != 1 || runs[0].Start < up[0].End {
				t.Errorf("node %s started at %d, before its dependency %s ended (%+v)", id, runs[0].Start, d, up)
			}
		}
	}
}

func testDAGFailure(t *testing.T, e *dagEnv, home *dagRegion, w *dagWorkers) {
	rule := func(n map[string]any, r task.TriggerRule) map[string]any { n["trigger_rule"] = string(r); return n }
	nodes := []map[string]any{
		dagNode("a", "fail", "eu-west-1"),
		dagNode("b", "ok", "", "a"), // all_success: CANCELED, UPSTREAM_FAILED
		dagNode("c", "ok", "", "b"), // below b: CANCELED too
		rule(dagNode("d", "ok", "ap-south-1", "a"), task.AllDone),
		rule(dagNode("e", "ok", "us-east-1", "a"), task.OneFailed),
		dagNode("f", "ok", "ap-south-1"),
		rule(dagNode("g", "ok", "", "f"), task.OneFailed), // nothing failed: SKIPPED
		dagNode("h", "ok", "", "g"),                       // below a skip: SKIPPED
		dagNode("i", "ok", "", "d", "e"),                  // both ran: runs
	}
	var created apiv1.DAGStatus
	e.submitDAG(home.any(), dagTokAcme, map[string]any{"name": "failing", "nodes": nodes}).Want(t, http.StatusCreated).JSON(t, &created)
	st := e.waitDAG(home, created.ID, 30*time.Second)
	if st.State != task.DAGFailed {
		t.Fatalf("DAG ended %s, want FAILED", st.State)
	}
	want := map[string]struct {
		state  task.NodeState
		reason string
		task   task.State
	}{
		"a": {task.NodeFailed, task.ReasonNonRetryable, task.Failed},
		"b": {task.NodeCanceled, task.ReasonUpstreamFailed, ""},
		"c": {task.NodeCanceled, task.ReasonUpstreamFailed, ""},
		"d": {task.NodeSuccess, task.ReasonCompleted, task.Success},
		"e": {task.NodeSuccess, task.ReasonCompleted, task.Success},
		"f": {task.NodeSuccess, task.ReasonCompleted, task.Success},
		"g": {task.NodeSkipped, reasonNoneFailed, ""},
		"h": {task.NodeSkipped, reasonUpstreamSkipped, ""},
		"i": {task.NodeSuccess, task.ReasonCompleted, task.Success},
	}
	ctx := context.Background()
	for _, nd := range st.Nodes {
		wn := want[nd.ID]
		if nd.State != wn.state || nd.Reason != wn.reason || nd.TaskState != wn.task {
			t.Errorf("node %s: %s %s task %q; want %s %s task %q", nd.ID, nd.State, nd.Reason, nd.TaskState, wn.state, wn.reason, wn.task)
		}
		if wn.task == "" {
			// Never submitted: no region holds its task, no worker ran it.
			for _, name := range dagRegions {
				if _, err := e.r(name).store.Get(ctx, nd.TaskID); !errors.Is(err, task.ErrNotFound) {
					t.Errorf("node %s: %s holds its task (%v)", nd.ID, name, err)
				}
			}
			if runs := w.ran(nd.TaskID); len(runs) != 0 {
				t.Errorf("node %s ran: %+v", nd.ID, runs)
			}
		}
	}
	if got := home.counter("ax_dag_runs_total", "FAILED"); got < 1 {
		t.Errorf("ax_dag_runs_total{state=FAILED} = %v", got)
	}
	// The metrics are served with the server's own.
	rep := e.call(http.MethodGet, home.any().http.URL+"/metrics", dagTokAdmin, nil).Want(t, http.StatusOK)
	for _, m := range []string{`ax_dag_runs_total{region="us-east-1",state="FAILED"}`, `ax_dag_nodes_released_total{region="us-east-1"}`} {
		if !strings.Contains(string(rep.Body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

func testDAGReads(t *testing.T, e *dagEnv, home *dagRegion) {
	var created apiv1.DAGStatus
	e.submitDAG(home.any(), dagTokAcme, map[string]any{"nodes": []any{dagNode("only", "ok", "")}}).Want(t, http.StatusCreated).JSON(t, &created)
	if created.Tenant != "acme" {
		t.Errorf("tenant %q, want the token's", created.Tenant)
	}
	// Asked in another region, the read goes home.
	away := e.r("ap-south-1").any()
	got := e.getDAG(away, dagTokAcme, created.ID)
	if got.ID != created.ID || got.Region != home.name || len(got.Nodes) != 1 || got.Nodes[0].TaskID != created.Nodes[0].TaskID {
		t.Fatalf("read through ap-south-1: %+v", got)
	}
	for _, s := range []*dagServer{home.any(), away} {
		er := e.call(http.MethodGet, s.http.URL+"/v1/dags/"+created.ID, dagTokGlobex, nil).Want(t, http.StatusNotFound).Err(t)
		if er.Code != "not_found" {
			t.Errorf("another tenant: %+v", er)
		}
	}
	missing := task.NewIDGen().New(home.name, 0, time.Now())
	e.call(http.MethodGet, away.http.URL+"/v1/dags/"+missing, dagTokAcme, nil).Want(t, http.StatusNotFound)
	e.call(http.MethodGet, away.http.URL+"/v1/dags/not-an-id", dagTokAcme, nil).Want(t, http.StatusNotFound)
	e.waitDAG(home, created.ID, 20*time.Second)
}

// testDAGLeaderKill: a chain that alternates regions; the home region's
// leader dies (no resign) after a few nodes; the standby takes over and the
// chain completes with every node run once.
func testDAGLeaderKill(t *testing.T, e *dagEnv, home *dagRegion, w *dagWorkers) {
	var nodes []map[string]any
	for i := range 12 {
		var deps []string
		if i > 0 {
			deps = []string{fmt.Sprintf("c%02d", i-1)}
		}
		nodes = append(nodes, dagNode(fmt.Sprintf("c%02d", i), "ok", dagRegions[i%3], deps...))
	}
	leader := home.leader()
	if leader == nil {
		t.Fatal("no leader in the home region")
	}
	var created apiv1.DAGStatus
	e.submitDAG(leader, dagTokAcme, map[string]any{"name": "chain", "nodes": nodes}).Want(t, http.StatusCreated).JSON(t, &created)
	var standby *dagServer
	home.mu.Lock()
	for _, s := range home.servers {
		if s != leader {
			standby = s
		}
	}
	home.mu.Unlock()
	done := func() int {
		n := 0
		for _, nd := range e.getDAG(standby, dagTokAcme, created.ID).Nodes {
			if nd.State == task.NodeSuccess {
				n++
			}
		}
		return n
	}
	fedtest.Eventually(t, 20*time.Second, "4 nodes done", func() bool { return done() >= 4 })
	home.crash(leader)
	before := done()
	fedtest.Eventually(t, 15*time.Second, "the standby leads", standby.cell.Leading)
	t.Logf("leader killed with %d of 12 nodes done", before)
	if before == len(nodes) {
		t.Fatal("the run ended before the leader was killed")
	}
	st := e.waitDAG(home, created.ID, 30*time.Second)
	if st.State != task.DAGSuccess {
		t.Fatalf("DAG ended %s: %+v", st.State, st.Nodes)
	}
	var prevEnd int64
	for _, nd := range st.Nodes {
		runs := w.ran(nd.TaskID)
		if len(runs) != 1 {
			t.Fatalf("node %s ran %d times", nd.ID, len(runs))
		}
		if runs[0].Start < prevEnd {
			t.Errorf("node %s started before its upstream ended", nd.ID)
		}
		prevEnd = runs[0].End
	}
}

// TestDAGReconcileIdempotent drives the reconciler by hand on a region with
// no leader: repeated and concurrent passes submit each node's task once,
// record each outcome once, and a released node whose task went missing is
// submitted again.
func TestDAGReconcileIdempotent(t *testing.T) {
	runs, st, rd := leaderlessRuns(t)
	const name = "us-east-1"
	ctx := context.Background()
	fence := queue.Fence{Name: "region", Token: 7}
	recon := func() *reconciler { return &reconciler{runs: runs, fence: fence, plans: map[string]*runPlan{}} }
	specOf := func(typ string) []byte { return []byte(`{"type":"` + typ + `"}`) }
	created, err := runs.Create(ctx, &apiv1.DAGRequest{Name: "idem", Tenant: "acme", Nodes: []apiv1.DAGNodeSpec{
		{ID: "a", Task: specOf("ok")},
		{ID: "b", DependsOn: []string{"a"}, Task: specOf("ok")},
		{ID: "c", DependsOn: []string{"a"}, Task: specOf("ok")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	taskOf := map[string]string{}
	for _, nd := range created.Nodes {
		taskOf[nd.ID] = nd.TaskID
	}
	released := func() float64 { return counterValue(runs.metrics.released.WithLabelValues(name)) }
	before := released()

	// Nothing ended yet: passes change nothing.
	for range 2 {
		if err := recon().reconcile(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Run a to completion by hand (place it, claim it, complete it).
	if _, err := st.Maintainer().Place(ctx, fence, []queue.Assignment{{ID: taskOf["a"], Pool: "cpu"}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 10})
	if err != nil || len(claimed) != 1 || claimed[0].ID != taskOf["a"] {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if _, err := st.Claimer().Complete(ctx, queue.Completion{ID: claimed[0].ID, Token: claimed[0].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	// Two reconcilers at once, then again: b and c are released once each.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := recon().reconcile(ctx, id); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := recon().reconcile(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := released() - before; got != 2 {
		t.Errorf("released %v nodes, want 2", got)
	}
	due, err := st.Maintainer().DueTasks(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 {
		t.Fatalf("%d tasks waiting for placement, want b and c once each: %v", len(due), due)
	}
	run, err := st.DAGs().DAG(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a := run.Nodes["a"]; a.State != task.NodeSuccess || a.Attempts != 1 || a.Region != name || a.Pool != "cpu" {
		t.Errorf("node a recorded as %+v", a)
	}
	for _, nd := range []string{"b", "c"} {
		if run.Nodes[nd].State != task.NodeReleased {
			t.Errorf("node %s is %s", nd, run.Nodes[nd].State)
		}
	}
	// A release whose submit was lost (a crash between recording and
	// submitting) is repaired: the task is submitted again.
	if err := rd.Client().Del(ctx, "ax:{us-east-1:0}:t:"+taskOf["c"]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := recon().reconcile(ctx, id); err != nil {
		t.Fatal(err)
	}
	if tk, err := st.Get(ctx, taskOf["c"]); err != nil || tk.State != task.Pending {
		t.Fatalf("c's task after repair: %v %v", tk, err)
	}
	// A leader with an older token is fenced.
	old := &reconciler{runs: runs, fence: queue.Fence{Name: "region", Token: 3}, plans: map[string]*runPlan{}}
	if _, err := st.DAGs().UpdateDAG(ctx, old.fence, id, []queue.DAGStep{{Node: "b", From: task.NodeReleased, To: queue.DAGNode{State: task.NodeFailed}}}); !errors.Is(err, queue.ErrFenced) {
		t.Errorf("older token: %v, want ErrFenced", err)
	}
	// The same id twice is refused.
	def, err := st.DAGs().DAGDefinition(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DAGs().CreateDAG(ctx, def, nil); !errors.Is(err, task.ErrExists) {
		t.Errorf("create twice: %v", err)
	}
}

func TestDAGTaskIDs(t *testing.T) {
	dag := task.NewIDGen().New("eu-west-1", 3, time.UnixMilli(1_700_000_000_000))
	a, err := queue.DAGTaskID(dag, "extract", 0)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := queue.DAGTaskID(dag, "extract", 0)
	other, _ := queue.DAGTaskID(dag, "load", 0)
	salted, _ := queue.DAGTaskID(dag, "extract", 1)
	if a != again || a == other || a == salted {
		t.Fatalf("derived ids: %s %s %s %s", a, again, other, salted)
	}
	p, err := task.ParseID(a)
	if err != nil || p.Region != "eu-west-1" || p.Shard != 3 || !p.Time.Equal(time.UnixMilli(1_700_000_000_000)) || a[:10] != dag[:10] {
		t.Fatalf("%s parses as %+v (%v)", a, p, err)
	}
}

func TestDAGDecide(t *testing.T) {
	S, F, C, K, W, R := task.NodeSuccess, task.NodeFailed, task.NodeCanceled, task.NodeSkipped, task.NodeWaiting, task.NodeReleased
	cases := []struct {
		rule   task.TriggerRule
		ups    []task.NodeState
		want   task.NodeState
		reason string
	}{
		{task.AllSuccess, nil, R, ""},
		{task.AllSuccess, []task.NodeState{S, S}, R, ""},
		{task.AllSuccess, []task.NodeState{S, R}, "", ""},
		{task.AllSuccess, []task.NodeState{F, R}, C, task.ReasonUpstreamFailed},
		{task.AllSuccess, []task.NodeState{C, S}, C, task.ReasonUpstreamFailed},
		{task.AllSuccess, []task.NodeState{K, S}, K, reasonUpstreamSkipped},
		{task.AllDone, []task.NodeState{F, S, K}, R, ""},
		{task.AllDone, []task.NodeState{F, W}, "", ""},
		{task.OneFailed, []task.NodeState{F, R}, R, ""},
		{task.OneFailed, []task.NodeState{S, R}, "", ""},
		{task.OneFailed, []task.NodeState{S, K}, K, reasonNoneFailed},
	}
	for _, c := range cases {
		got, reason := decide(c.rule, c.ups)
		if got != c.want || reason != c.reason {
			t.Errorf("%s %v: %q %q, want %q %q", c.rule, c.ups, got, reason, c.want, c.reason)
		}
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// leaderlessRuns are the DAG runs of a node of region us-east-1 on its own
// Redis and etcd, with no cell: tests drive its leader loops by hand.
func leaderlessRuns(t *testing.T) (*Runs, *store.Store, *testenv.Redis) {
	t.Helper()
	etcd := testenv.StartEtcd(t)
	rd := testenv.StartRedis(t)
	st, err := store.New(rd.Client(), queue.Options{Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	pcfg := placement.DefaultConfig()
	view := view.New(etcd.Client(), "/ax/", pcfg, time.Second, nil)
	t.Cleanup(view.Close)
	n, err := federation.NewNode(federation.Config{Region: "us-east-1", Placement: pcfg, Logger: discardLog()}, st, view, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(st.DAGs(), n, Config{Region: "us-east-1", Logger: discardLog()}), st, rd
}

// testDAGParents: extract (us-east-1) and bin (eu-west-1, a result that is
// not UTF-8) feed load (ap-south-1) under all_done beside a failed node;
// load's task carries both results byte for byte and nothing of the
// failed parent or of nodes that are not its parents.
func testDAGParents(t *testing.T, e *dagEnv, home *dagRegion, w *dagWorkers) {
	load := dagNode("load", "ok", "ap-south-1", "extract", "bin", "broken")
	load["trigger_rule"] = "all_done"
	nodes := []map[string]any{dagNode("extract", "ok", "us-east-1"), dagNode("bin", "bytes", "eu-west-1"),
		dagNode("broken", "fail", "us-east-1"), dagNode("other", "ok", "eu-west-1"), load}
	var created apiv1.DAGStatus
	e.submitDAG(home.any(), dagTokAcme, map[string]any{"name": "parents", "nodes": nodes}).Want(t, http.StatusCreated).JSON(t, &created)
	e.waitDAG(home, created.ID, 30*time.Second)
	ids := map[string]string{}
	for _, n := range created.Nodes {
		ids[n.ID] = n.TaskID
	}
	runs := w.ran(ids["load"])
	if len(runs) != 1 {
		t.Fatalf("load ran %d times, want 1", len(runs))
	}
	want := task.ParentResults{"extract": []byte(ids["extract"] + " in us-east-1"), "bin": []byte("\xff\x00\xfe")}
	if diff := cmp.Diff(want, runs[0].Parents); diff != "" {
		t.Fatalf("load's parents (-want +got):\n%s", diff)
	}
	if roots := w.ran(ids["extract"]); len(roots) != 1 || roots[0].Parents != nil {
		t.Fatalf("extract ran %v; want once, with no parents", roots)
	}
}

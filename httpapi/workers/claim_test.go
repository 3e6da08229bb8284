package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker/proxy"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// protoEnv serves the protocol over a real Redis to one worker token of
// acme's pool acme-gpu.
type protoEnv struct {
	t   *testing.T
	ctx context.Context
	st  *store.Store
	h   *Handlers
	p   endpoint.Principal
}

func newProtoEnv(t *testing.T) *protoEnv { return newProtoEnvLimits(t, Limits{}) }

func newProtoEnvLimits(t *testing.T, lim Limits) *protoEnv {
	testenv.Slow(t)
	rdb := testenv.StartRedis(t).Client()
	st, err := store.New(rdb, queue.Options{Region: "us-east-1", Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	px := proxy.New(st.Claimer(), nil)
	h := New(Config{Limits: lim, Region: "us-east-1", Pools: []string{"acme-gpu"}, Claimer: px, Recorder: px,
		Reader: st, Redis: rdb, Heartbeat: time.Second})
	p := endpoint.Principal{Name: "acme-workers", Role: endpoint.RoleWorker,
		Worker: &endpoint.WorkerScope{Tenants: []string{"acme"}, Pools: []string{"acme-gpu"}}}
	return &protoEnv{t: t, ctx: context.Background(), st: st, h: h, p: p}
}

func (e *protoEnv) submit(tenant string) string {
	e.t.Helper()
	sp := &task.Spec{Type: "resize", Tenant: tenant}
	if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
		e.t.Fatal(err)
	}
	res, err := e.st.Submitter().Submit(e.ctx, queue.NewTask{Spec: sp, Pool: "acme-gpu", Pinned: true})
	if err != nil || res[0].Err != nil {
		e.t.Fatal(err, res)
	}
	return res[0].ID
}

func (e *protoEnv) call(method, path, body string, out any) int {
	rec := e.do(method, path, body)
	if out != nil {
		_ = json.Unmarshal(rec.Body.Bytes(), out)
	}
	return rec.Code
}

func (e *protoEnv) do(method, path, body string) *httptest.ResponseRecorder {
	return e.doAs(context.Background(), e.p, method, path, body)
}

// doAs sends a request as p that ends (its client gone) with ctx.
func (e *protoEnv) doAs(ctx context.Context, p endpoint.Principal, method, path, body string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	for _, rt := range e.h.Routes() {
		mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := rt.Handle(w, r, p); err != nil {
				endpoint.WriteError(w, err)
			}
		})
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)).WithContext(ctx))
	return rec
}

func (e *protoEnv) register(slots int) string {
	e.t.Helper()
	var reg apiv1.WorkerRegistered
	if code := e.call("POST", "/v1/workers", fmt.Sprintf(`{"pool":"acme-gpu","slots":%d}`, slots), &reg); code != 201 {
		e.t.Fatalf("register: %d", code)
	}
	return reg.WorkerID
}

// TestClaimRefusesOtherTenants: a task of a tenant outside the worker's
// token that sits in its pool anyway (placed before the pool was declared
// a tenant's own) is never handed out: the claim gives it back
// (TENANT_REFUSED, no attempt spent) and answers no task; the token's own
// tenant's task is handed out.
func TestClaimRefusesOtherTenants(t *testing.T) {
	e := newProtoEnv(t)
	id := e.register(4)
	globex := e.submit("globex")
	var c apiv1.WorkerClaimResponse
	if code := e.call("POST", "/v1/workers/"+id+"/claim", `{"max":4,"wait_ms":0}`, &c); code != 200 || len(c.Tasks) != 0 {
		t.Fatalf("claim with only globex's task: %d %+v", code, c)
	}
	tk, err := e.st.Get(e.ctx, globex)
	if err != nil || tk.Reason != task.ReasonTenantRefused || tk.Attempts != 0 || tk.State == task.Running {
		t.Fatalf("globex's task after the claim: %+v %v", tk, err)
	}
	acme := e.submit("acme")
	if code := e.call("POST", "/v1/workers/"+id+"/claim", `{"max":4,"wait_ms":2000}`, &c); code != 200 ||
		len(c.Tasks) != 1 || c.Tasks[0].ID != acme || c.Tasks[0].Tenant != "acme" {
		t.Fatalf("claim with acme's task: %d %+v", code, c)
	}
	if code := e.call("POST", "/v1/workers/"+id+"/claim", `{"max":4,"wait_ms":1500}`, &c); code != 200 || len(c.Tasks) != 0 {
		t.Fatalf("claim after globex's task is READY again: %d %+v", code, c)
	}
}

// TestClaimRetryAnswersWhatTheFirstTryTook: a claim's answer lost (the
// connection broke after the server recorded the tasks, or the server died
// between the store's claim and recording them) costs no attempt: the
// retry with the same claim_id answers the same tasks under the same
// leases, and the worker's success ends them after one attempt. A claim of
// another id takes only new tasks.
func TestClaimRetryAnswersWhatTheFirstTryTook(t *testing.T) {
	e := newProtoEnv(t)
	id := e.register(4)
	claim := func(body string) apiv1.WorkerClaimResponse {
		t.Helper()
		var c apiv1.WorkerClaimResponse
		if code := e.call("POST", "/v1/workers/"+id+"/claim", body, &c); code != 200 {
			t.Fatalf("claim %s: %d", body, code)
		}
		return c
	}
	succeed := func(wt apiv1.WorkerTask) {
		t.Helper()
		var ans apiv1.WorkerReportResponse
		body := fmt.Sprintf(`{"outcomes":[{"id":%q,"lease":%q,"status":"success"}]}`, wt.ID, wt.Lease)
		if code := e.call("POST", "/v1/workers/"+id+"/report", body, &ans); code != 200 || len(ans.Outcomes) != 1 || !ans.Outcomes[0].OK {
			t.Fatalf("report: %d %+v", code, ans)
		}
		tk, err := e.st.Get(e.ctx, wt.ID)
		if err != nil || tk.State != task.Success || tk.Attempts != 1 {
			t.Fatalf("task %s after its success: %+v %v", wt.ID, tk, err)
		}
	}

	t.Run("answer lost after the session recorded it", func(t *testing.T) {
		a := e.submit("acme")
		first := claim(`{"max":4,"wait_ms":1000,"claim_id":"c-1"}`)
		if len(first.Tasks) != 1 || first.Tasks[0].ID != a {
			t.Fatalf("first try: %+v", first)
		}
		b := e.submit("acme")
		again := claim(`{"max":4,"wait_ms":1000,"claim_id":"c-1"}`)
		if len(again.Tasks) != 1 || again.Tasks[0].ID != a || again.Tasks[0].Lease != first.Tasks[0].Lease {
			t.Fatalf("retry: %+v, want %s under lease %s again", again, a, first.Tasks[0].Lease)
		}
		next := claim(`{"max":4,"wait_ms":1000,"claim_id":"c-2"}`)
		if len(next.Tasks) != 1 || next.Tasks[0].ID != b {
			t.Fatalf("a new claim: %+v, want only %s", next, b)
		}
		succeed(again.Tasks[0])
		succeed(next.Tasks[0])
	})

	t.Run("server died within the store claim", func(t *testing.T) {
		a := e.submit("acme")
		// What a server does for claim c-3 before it dies: the record,
		// then the store's claim, whose answer nobody reads.
		if err := e.h.sessions.intend(e.ctx, id, "c-3"); err != nil {
			t.Fatal(err)
		}
		c, err := e.st.Claimer().ClaimTasks(e.ctx, queue.ClaimRequest{Pool: "acme-gpu", Worker: id, N: 4})
		if err != nil || len(c.Tasks) != 1 || c.Tasks[0].ID != a {
			t.Fatalf("store claim: %+v %v", c, err)
		}
		again := claim(`{"max":4,"wait_ms":0,"claim_id":"c-3"}`)
		if len(again.Tasks) != 1 || again.Tasks[0].ID != a || again.Tasks[0].Lease != c.Tasks[0].LeaseToken {
			t.Fatalf("retry: %+v, want %s under lease %s", again, a, c.Tasks[0].LeaseToken)
		}
		succeed(again.Tasks[0])
	})

	t.Run("first try took nothing", func(t *testing.T) {
		if c := claim(`{"max":4,"wait_ms":0,"claim_id":"c-4"}`); len(c.Tasks) != 0 {
			t.Fatalf("empty pool: %+v", c)
		}
		a := e.submit("acme")
		if c := claim(`{"max":4,"wait_ms":1000,"claim_id":"c-4"}`); len(c.Tasks) != 1 || c.Tasks[0].ID != a {
			t.Fatalf("retry of an empty claim: %+v, want %s claimed afresh", c, a)
		}
	})

	if code := e.call("POST", "/v1/workers/"+id+"/claim", fmt.Sprintf(`{"max":1,"claim_id":%q}`, strings.Repeat("x", apiv1.MaxClaimID+1)), nil); code != 400 {
		t.Fatalf("an oversized claim_id: %d, want 400", code)
	}
}

// TestClaimLongPollCapPerToken: with remote_workers.max_long_polls_per_token
// claims of a token waiting on a server, a further claim of that token
// answers 429 saturated with Retry-After, names the cap it met (per token)
// and takes nothing, while a claim of another token of the same tenant is
// served; once the waiting claim ended (its client left), the token's claim
// is served again. The waiting claim is held open by its client, not by a
// timer, and cannot take a task (its one slot is busy), so the second
// claim, sent once the first is counted waiting, meets a settled state.
func TestClaimLongPollCapPerToken(t *testing.T) {
	e := newProtoEnvLimits(t, Limits{LongPollsPerToken: 1, MaxWait: time.Minute})
	a, b := e.register(1), e.register(4)
	busy := e.submit("acme")
	var c apiv1.WorkerClaimResponse
	if code := e.call("POST", "/v1/workers/"+a+"/claim", `{"max":1,"wait_ms":0}`, &c); code != http.StatusOK || len(c.Tasks) != 1 || c.Tasks[0].ID != busy {
		t.Fatalf("worker a's claim of its one task: %d %+v", code, c)
	}
	other := e.p
	other.Name = "acme-workers-2"
	var reg apiv1.WorkerRegistered
	if rec := e.doAs(e.ctx, other, "POST", "/v1/workers", `{"pool":"acme-gpu","slots":4}`); rec.Code != 201 ||
		json.Unmarshal(rec.Body.Bytes(), &reg) != nil {
		t.Fatalf("register with another token: %d %s", rec.Code, rec.Body)
	}
	ctx, leave := context.WithCancel(e.ctx)
	defer leave()
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- e.doAs(ctx, e.p, "POST", "/v1/workers/"+a+"/claim", `{"max":4,"wait_ms":60000}`) }()
	for end := time.Now().Add(30 * time.Second); testutil.ToFloat64(e.h.metrics.longPolls) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the first claim is not waiting after 30 s")
		}
	}
	id := e.submit("acme")
	rec := e.do("POST", "/v1/workers/"+b+"/claim", `{"max":4,"wait_ms":0}`)
	var eb struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &eb)
	if rec.Code != http.StatusTooManyRequests || eb.Error.Code != apiv1.CodeSaturated || rec.Header().Get("Retry-After") == "" ||
		!strings.Contains(eb.Error.Message, "at most 1 per token") {
		t.Fatalf("a second waiting claim of the token: %d %s (Retry-After %q), want 429 saturated with Retry-After naming the cap per token",
			rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"))
	}
	// The refused claim took nothing: the task is there for the other token.
	rec = e.doAs(e.ctx, other, "POST", "/v1/workers/"+reg.WorkerID+"/claim", `{"max":4,"wait_ms":0}`)
	if json.Unmarshal(rec.Body.Bytes(), &c) != nil || rec.Code != http.StatusOK || len(c.Tasks) != 1 || c.Tasks[0].ID != id {
		t.Fatalf("a claim of another token of the same tenant: %d %s, want task %s", rec.Code, rec.Body, id)
	}
	leave()
	<-done
	if code := e.call("POST", "/v1/workers/"+b+"/claim", `{"max":4,"wait_ms":0}`, &c); code != http.StatusOK {
		t.Fatalf("the token's claim once its waiting claim ended: %d", code)
	}
}

// TestReportClaimsInTheSameRoundTrip: a report with a claim records its
// outcome first and answers the tasks it then claimed, counting the slot
// the outcome freed; the same report resent (its answer lost) answers the
// same tasks under the same leases and takes no others; a claim.max out of
// range is 400 field claim.max and nothing of the report is applied.
func TestReportClaimsInTheSameRoundTrip(t *testing.T) {
	e := newProtoEnv(t)
	id := e.register(1)
	first := e.submit("acme")
	var c apiv1.WorkerClaimResponse
	if code := e.call("POST", "/v1/workers/"+id+"/claim", `{"max":1,"wait_ms":0}`, &c); code != 200 || len(c.Tasks) != 1 {
		t.Fatalf("claim: %d %+v", code, c)
	}
	second, third := e.submit("acme"), e.submit("acme")
	done := fmt.Sprintf(`{"outcomes":[{"id":%q,"lease":%q,"status":"success"}]`, first, c.Tasks[0].Lease)

	var bad apiv1.ErrorBody
	if code := e.call("POST", "/v1/workers/"+id+"/report", done+`,"claim":{"max":0}}`, &bad); code != 400 || bad.Error.Field != "claim.max" {
		t.Fatalf("claim.max 0: %d %+v", code, bad)
	}
	if tk, _ := e.st.Get(e.ctx, first); tk.State != task.Running {
		t.Fatalf("a refused report changed the task: %s", tk.State)
	}

	body := done + `,"claim":{"max":4,"claim_id":"c-1"}}`
	var r1, r2 apiv1.WorkerReportResponse
	if code := e.call("POST", "/v1/workers/"+id+"/report", body, &r1); code != 200 || len(r1.Outcomes) != 1 || !r1.Outcomes[0].OK {
		t.Fatalf("report: %d %+v", code, r1)
	}
	if tk, _ := e.st.Get(e.ctx, first); tk.State != task.Success {
		t.Fatalf("the reported task: %s", tk.State)
	}
	// One slot: the outcome freed it, and the claim took one task.
	if len(r1.Tasks) != 1 || (r1.Tasks[0].ID != second && r1.Tasks[0].ID != third) || r1.Tasks[0].Lease == "" {
		t.Fatalf("the report's claim answered %+v, want one of %s %s", r1.Tasks, second, third)
	}
	if code := e.call("POST", "/v1/workers/"+id+"/report", body, &r2); code != 200 {
		t.Fatalf("resent report: %d", code)
	}
	if len(r2.Tasks) != 1 || r2.Tasks[0].ID != r1.Tasks[0].ID || r2.Tasks[0].Lease != r1.Tasks[0].Lease {
		t.Fatalf("the resent report's claim answered %+v, want %+v again", r2.Tasks, r1.Tasks)
	}
	running := 0
	for _, tid := range []string{second, third} {
		if tk, _ := e.st.Get(e.ctx, tid); tk.State == task.Running {
			running++
		}
	}
	if running != 1 {
		t.Fatalf("%d tasks running after the resent report, want 1 (one slot)", running)
	}
	// The claimed task is held: its outcome is recorded.
	out := fmt.Sprintf(`{"outcomes":[{"id":%q,"lease":%q,"status":"success"}]}`, r1.Tasks[0].ID, r1.Tasks[0].Lease)
	var r3 apiv1.WorkerReportResponse
	if code := e.call("POST", "/v1/workers/"+id+"/report", out, &r3); code != 200 || !r3.Outcomes[0].OK || len(r3.Tasks) != 0 {
		t.Fatalf("outcome of the report-claimed task: %d %+v", code, r3)
	}
}

// countingClaimer counts the store heartbeats a Handlers sends.
type countingClaimer struct {
	Claimer
	mu    sync.Mutex
	beats int
}

func (c *countingClaimer) Heartbeat(ctx context.Context, w proxy.Worker, held []apiv1.WorkerLease) ([]apiv1.WorkerStop, error) {
	c.mu.Lock()
	c.beats++
	c.mu.Unlock()
	return c.Claimer.Heartbeat(ctx, w, held)
}

// TestReportsWithoutLeasesBeatOncePerHalfHeartbeat: reports that carry
// only outcomes record the worker alive in its pool once per half
// heartbeat, not once each; a report listing held leases always extends
// them.
func TestReportsWithoutLeasesBeatOncePerHalfHeartbeat(t *testing.T) {
	e := newProtoEnv(t)
	cc := &countingClaimer{Claimer: e.h.cfg.Claimer}
	e.h = New(Config{Region: "us-east-1", Pools: []string{"acme-gpu"}, Claimer: cc, Recorder: e.h.cfg.Recorder,
		Reader: e.h.cfg.Reader, Redis: e.h.cfg.Redis, Heartbeat: time.Hour})
	id := e.register(8)
	for range 4 {
		e.submit("acme")
	}
	var c apiv1.WorkerClaimResponse
	if code := e.call("POST", "/v1/workers/"+id+"/claim", `{"max":4,"wait_ms":0}`, &c); code != 200 || len(c.Tasks) != 4 {
		t.Fatalf("claim: %d %+v", code, c)
	}
	for _, tk := range c.Tasks[:3] {
		var r apiv1.WorkerReportResponse
		body := fmt.Sprintf(`{"outcomes":[{"id":%q,"lease":%q,"status":"success"}]}`, tk.ID, tk.Lease)
		if code := e.call("POST", "/v1/workers/"+id+"/report", body, &r); code != 200 || !r.Outcomes[0].OK {
			t.Fatalf("report: %d %+v", code, r)
		}
	}
	if cc.beats != 1 {
		t.Fatalf("%d store heartbeats for 3 outcome-only reports within half a heartbeat, want 1", cc.beats)
	}
	last := c.Tasks[3]
	held := fmt.Sprintf(`{"held":[{"id":%q,"lease":%q}]}`, last.ID, last.Lease)
	if code := e.call("POST", "/v1/workers/"+id+"/report", held, nil); code != 200 || cc.beats != 2 {
		t.Fatalf("a report with held leases: %d, %d store heartbeats, want 2", code, cc.beats)
	}
}

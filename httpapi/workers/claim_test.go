package workers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker/proxy"
)

// TestClaimRefusesOtherTenants: a task of a tenant outside the worker's
// token that sits in its pool anyway (placed before the pool was declared
// a tenant's own) is never handed out: the claim gives it back
// (TENANT_REFUSED, no attempt spent) and answers no task; the token's own
// tenant's task is handed out.
func TestClaimRefusesOtherTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis")
	}
	ctx := context.Background()
	rdb := testenv.StartRedis(t).Client()
	st, err := store.New(rdb, queue.Options{Region: "us-east-1", Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(tenant string) string {
		sp := &task.Spec{Type: "resize", Tenant: tenant}
		if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
			t.Fatal(err)
		}
		res, err := st.Submitter().Submit(ctx, queue.NewTask{Spec: sp, Pool: "acme-gpu", Pinned: true})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		return res[0].ID
	}
	px := proxy.New(st.Claimer(), nil)
	h := New(Config{Region: "us-east-1", Pools: []string{"acme-gpu"}, Claimer: px, Recorder: px,
		Reader: st, Redis: rdb, Heartbeat: time.Second})
	p := endpoint.Principal{Name: "acme-workers", Role: endpoint.RoleWorker,
		Worker: &endpoint.WorkerScope{Tenants: []string{"acme"}, Pools: []string{"acme-gpu"}}}
	call := func(method, path, body string, out any) int {
		mux := http.NewServeMux()
		for _, rt := range h.Routes() {
			mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
				if err := rt.Handle(w, r, p); err != nil {
					endpoint.WriteError(w, err)
				}
			})
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		if out != nil {
			_ = json.Unmarshal(rec.Body.Bytes(), out)
		}
		return rec.Code
	}
	var reg apiv1.WorkerRegistered
	if code := call("POST", "/v1/workers", `{"pool":"acme-gpu","slots":4}`, &reg); code != 201 {
		t.Fatalf("register: %d", code)
	}
	globex := submit("globex")
	var c apiv1.WorkerClaimResponse
	if code := call("POST", "/v1/workers/"+reg.WorkerID+"/claim", `{"max":4,"wait_ms":0}`, &c); code != 200 || len(c.Tasks) != 0 {
		t.Fatalf("claim with only globex's task: %d %+v", code, c)
	}
	tk, err := st.Get(ctx, globex)
	if err != nil || tk.Reason != task.ReasonTenantRefused || tk.Attempts != 0 || tk.State == task.Running {
		t.Fatalf("globex's task after the claim: %+v %v", tk, err)
	}
	acme := submit("acme")
	if code := call("POST", "/v1/workers/"+reg.WorkerID+"/claim", `{"max":4,"wait_ms":2000}`, &c); code != 200 ||
		len(c.Tasks) != 1 || c.Tasks[0].ID != acme || c.Tasks[0].Tenant != "acme" {
		t.Fatalf("claim with acme's task: %d %+v", code, c)
	}
	if code := call("POST", "/v1/workers/"+reg.WorkerID+"/claim", `{"max":4,"wait_ms":1500}`, &c); code != 200 || len(c.Tasks) != 0 {
		t.Fatalf("claim after globex's task is READY again: %d %+v", code, c)
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// rworker is a remote worker written against the wire (docs/worker-protocol.md):
// it holds only server URLs of one region and a worker token, moves to the
// next URL when a server does not answer, claims with a short long-poll and
// reports every round. run makes a task's handler: it returns the result,
// or false to keep the task running (it is asked again next round).
type rworker struct {
	t     *testing.T
	urls  []string
	token string
	pool  string
	id    string
	run   func(wt apiv1.WorkerTask, round int) (result any, done bool)

	mu      sync.Mutex
	cur     int
	held    map[string]apiv1.WorkerTask
	rounds  map[string]int
	seen    []apiv1.WorkerTask // every task handed to it
	stopped []apiv1.WorkerStop
	paused  bool
	parked  bool // the loop saw paused: no claim of its is in flight
}

func newRWorker(t *testing.T, urls []string, token, pool string) *rworker {
	w := &rworker{t: t, urls: urls, token: token, pool: pool, held: map[string]apiv1.WorkerTask{}, rounds: map[string]int{}}
	var reg apiv1.WorkerRegistered
	if code, body := w.call(http.MethodPost, "/v1/workers", apiv1.WorkerRegister{Pool: pool, Slots: 4}, &reg); code != 201 {
		t.Fatalf("register: %d %s", code, body)
	}
	w.id = reg.WorkerID
	return w
}

// call sends one request to the current server, moving to the next one
// while a server does not answer.
func (w *rworker) call(method, path string, body, out any) (int, []byte) {
	b, _ := json.Marshal(body)
	for try := 0; try < 2*len(w.urls)+2; try++ {
		w.mu.Lock()
		url := w.urls[w.cur%len(w.urls)]
		w.mu.Unlock()
		req, _ := http.NewRequest(method, url+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+w.token)
		cli := &http.Client{Timeout: 10 * time.Second}
		resp, err := cli.Do(req)
		if err != nil {
			w.mu.Lock()
			w.cur++
			w.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 503 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if out != nil && resp.StatusCode < 300 && len(data) > 0 {
			if err := json.Unmarshal(data, out); err != nil {
				w.t.Errorf("%s %s: %v: %s", method, path, err, data)
			}
		}
		return resp.StatusCode, data
	}
	return 0, nil
}

// loop claims and reports until ctx ends (and nothing while paused).
func (w *rworker) loop(ctx context.Context) {
	for ctx.Err() == nil {
		w.mu.Lock()
		paused := w.paused
		w.parked = paused
		w.mu.Unlock()
		if paused {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		w.report()
		var c apiv1.WorkerClaimResponse
		if code, body := w.call(http.MethodPost, "/v1/workers/"+w.id+"/claim", apiv1.WorkerClaimRequest{Max: 4, WaitMS: 300}, &c); code != 200 && ctx.Err() == nil {
			w.t.Errorf("claim: %d %s", code, body)
			return
		}
		w.mu.Lock()
		for _, tk := range c.Tasks {
			w.held[tk.ID] = tk
			w.seen = append(w.seen, tk)
		}
		w.mu.Unlock()
	}
}

// report sends one report: progress 50 and the held leases of tasks still
// running, the outcomes of those done.
func (w *rworker) report() {
	var rep apiv1.WorkerReport
	w.mu.Lock()
	for id, tk := range w.held {
		w.rounds[id]++
		res, done := w.run(tk, w.rounds[id])
		if !done {
			rep.Held = append(rep.Held, apiv1.WorkerLease{ID: id, Lease: tk.Lease})
			rep.Progress = append(rep.Progress, apiv1.WorkerProgress{ID: id, Lease: tk.Lease, Percent: 50, Message: "half way"})
			continue
		}
		b, _ := json.Marshal(res)
		rep.Outcomes = append(rep.Outcomes, apiv1.WorkerOutcome{ID: id, Lease: tk.Lease, Status: apiv1.OutcomeSuccess, Result: b})
		delete(w.held, id)
	}
	w.mu.Unlock()
	var out apiv1.WorkerReportResponse
	if code, body := w.call(http.MethodPost, "/v1/workers/"+w.id+"/report", rep, &out); code != 200 {
		w.t.Errorf("report: %d %s", code, body)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range out.Outcomes {
		if !o.OK {
			w.t.Errorf("outcome of %s not recorded: %+v", o.ID, o)
		}
	}
	for _, s := range out.Stop {
		delete(w.held, s.ID)
		w.stopped = append(w.stopped, s)
	}
}

// pause stops the loop's claims and reports (returning once no claim of
// its is in flight), or resumes them.
func (w *rworker) pause(t *testing.T, p bool) {
	w.mu.Lock()
	w.paused = p
	w.mu.Unlock()
	if p {
		waitUntil(t, 10*time.Second, "the remote worker to pause", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.parked
		})
	}
}

func (w *rworker) handed(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, tk := range w.seen {
		if tk.ID == id {
			n++
		}
	}
	return n
}

// TestRemoteWorker: auth on, two regions of two servers. A remote worker
// with only the API URLs of us-east-1 and a worker token of team-a's own
// pool runs team-a's tasks there (one handed off from eu-west-1) with
// progress and result shown by GET; team-b's tasks never reach it (one
// pinned to the pool by tags is unplaceable); its token is 403 on the
// rest of the API; killing the server it talks to mid-task loses nothing
// and runs nothing twice; a worker that vanishes loses its task to the
// reaper and it runs again; bad reports are 4xx naming the field and
// change nothing.
func TestRemoteWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a federation")
	}
	t.Parallel()
	workerTok := "worker-" + randomHex(16)
	own := "- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}\n" +
		"- {name: team-a-gpu, tags: {gpu: l4}, slots: 8, price_per_slot_hour: 0.5, tenants: [team-a]}"
	fed := newFederation(t, fedOpts{servers: 2, noWorkers: true,
		pools:  map[string]string{"us-east-1": own, "eu-west-1": own},
		tokens: fmt.Sprintf("- {name: team-a-gpu-workers, token_sha256: %s, role: worker, tenants: [team-a], pools: [team-a-gpu]}", sha256Hex(workerTok))})
	us, eu := "us-east-1", "eu-west-1"
	for _, r := range []string{us, eu} {
		fed.startWorker(r, "cpu")
	}
	urls := func(region string) []string {
		var out []string
		for _, s := range fed.region(region).servers {
			out = append(out, s.api)
		}
		return out
	}
	var slow sync.Map // task ids held until released
	runner := func(wt apiv1.WorkerTask, round int) (any, bool) {
		if v, ok := slow.Load(wt.ID); ok && !v.(bool) {
			return nil, false
		}
		if round < 2 {
			return nil, false // one round of progress first
		}
		return map[string]any{"ran": wt.ID, "attempt": wt.Attempt}, true
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	w := newRWorker(t, urls(us), workerTok, "team-a-gpu")
	w.run = runner
	wg.Add(1)
	go func() { defer wg.Done(); w.loop(ctx) }()
	// eu-west-1's own pool has a live worker too, so the federation is placeable.
	idle := newRWorker(t, urls(eu), workerTok, "team-a-gpu")
	idle.run = runner
	wg.Add(1)
	go func() { defer wg.Done(); idle.loop(ctx) }()
	fed.waitPlaceable()
	gpu := map[string]string{"gpu": "l4"}

	t.Run("team-a's tasks, one handed off, with progress and result", func(t *testing.T) {
		f := fed.on(t)
		id, where := f.submit(us, tokSubmitterA, map[string]any{"type": "resize", "tags": gpu, "regions": []string{us}})
		if where != us {
			t.Fatalf("placed in %s", where)
		}
		h := f.handedOffTask(eu, us, tokSubmitterA, map[string]any{"type": "resize", "tags": gpu})
		for _, tid := range []string{id, h.ID} {
			tk := f.waitState(us, tokSubmitterA, tid, task.Success, 30*time.Second)
			if tk.Worker != w.id || tk.Pool != "team-a-gpu" || tk.Attempts != 1 {
				t.Errorf("%s ran by %q in %q, %d attempts", tid, tk.Worker, tk.Pool, tk.Attempts)
			}
			if tk.Progress == nil || tk.Progress.Percent != 50 || tk.Progress.Message != "half way" {
				t.Errorf("%s progress %+v", tid, tk.Progress)
			}
			if want := fmt.Sprintf(`{"attempt":1,"ran":%q}`, tid); tk.Result != want {
				t.Errorf("%s result %q, want %q", tid, tk.Result, want)
			}
		}
		// Read from the other region too (the home of the handed-off one).
		if tk, code := f.getTask(eu, tokSubmitterA, h.ID); code != 200 || tk.Progress == nil || tk.Result == "" {
			t.Errorf("GET %s via %s: %d %+v", h.ID, eu, code, tk)
		}
	})

	t.Run("team-b's tasks never reach it", func(t *testing.T) {
		f := fed.on(t)
		code, body := f.call(us, tokSubmitterB, http.MethodPost, "/v1/tasks", map[string]any{"type": "resize", "tags": gpu, "regions": []string{us}})
		if code != 422 || !strings.Contains(string(body), "TENANT_POOL") {
			t.Fatalf("team-b's task pinned to team-a's pool: %d %s", code, body)
		}
		id, _ := f.submit(us, tokSubmitterB, map[string]any{"type": "noop"})
		tk := f.waitState(us, tokSubmitterB, id, task.Success, 30*time.Second)
		if tk.Pool != "cpu" || w.handed(id) != 0 {
			t.Errorf("team-b's task ran in %s, handed to the remote worker %d times", tk.Pool, w.handed(id))
		}
		w.mu.Lock()
		for _, s := range w.seen {
			if s.Tenant != "team-a" {
				t.Errorf("the remote worker was handed %s of tenant %s", s.ID, s.Tenant)
			}
		}
		w.mu.Unlock()
	})

	t.Run("its token serves nothing else", func(t *testing.T) {
		f := fed.on(t)
		f.tokens["remote-worker"] = workerTok
		defer delete(f.tokens, "remote-worker")
		for _, c := range []struct{ method, path string }{
			{"POST", "/v1/tasks"}, {"GET", "/v1/tasks"}, {"GET", "/v1/tasks/" + "x"}, {"POST", "/v1/regions/us-east-1/drain"},
			{"GET", "/v1/regions"}, {"GET", "/v1/dlq"}, {"POST", "/v1/tasks/cancel"},
		} {
			code, body := f.call(us, "remote-worker", c.method, c.path, map[string]any{"type": "noop"})
			if code != 403 || !strings.Contains(string(body), `"field":"Authorization"`) {
				t.Errorf("%s %s with the worker token: %d %s", c.method, c.path, code, body)
			}
		}
	})

	t.Run("bad reports change nothing", func(t *testing.T) {
		f := fed.on(t)
		id, _ := f.submit(us, tokSubmitterA, map[string]any{"type": "resize", "tags": gpu, "regions": []string{us}})
		slow.Store(id, false)
		defer slow.Store(id, true)
		waitUntil(t, 20*time.Second, "the remote worker to hold "+id, func() bool { return w.handed(id) == 1 })
		w.mu.Lock()
		lease := w.held[id].Lease
		w.mu.Unlock()
		other, _ := f.submit(us, tokSubmitterB, map[string]any{"type": "noop"})
		big := []byte(`"` + strings.Repeat("x", apiv1.DefaultMaxResultBytes) + `"`)
		for _, c := range []struct {
			path  string
			body  apiv1.WorkerReport
			code  int
			field string
		}{
			{"/v1/workers/rw-00000000000000000000000000000000/report", apiv1.WorkerReport{}, 404, "worker_id"},
			{"/v1/workers/" + w.id + "/report", apiv1.WorkerReport{Outcomes: []apiv1.WorkerOutcome{
				{ID: id, Lease: lease, Status: apiv1.OutcomeSuccess}, {ID: other, Lease: "1", Status: apiv1.OutcomeSuccess}}}, 403, "outcomes[1].id"},
			{"/v1/workers/" + w.id + "/report", apiv1.WorkerReport{Outcomes: []apiv1.WorkerOutcome{
				{ID: id, Lease: lease, Status: apiv1.OutcomeSuccess, Result: big}}}, 413, "outcomes[0].result"},
			{"/v1/workers/" + w.id + "/report", apiv1.WorkerReport{Outcomes: []apiv1.WorkerOutcome{
				{ID: id, Lease: lease, Status: "done"}}}, 400, "outcomes[0].status"},
			{"/v1/workers/" + w.id + "/report", apiv1.WorkerReport{Outcomes: []apiv1.WorkerOutcome{
				{ID: "us-east-1.nope", Lease: lease, Status: apiv1.OutcomeSuccess}}}, 404, "outcomes[0].id"},
		} {
			code, body := w.call(http.MethodPost, c.path, c.body, nil)
			var e apiv1.ErrorBody
			_ = json.Unmarshal(body, &e)
			if code != c.code || e.Error.Field != c.field {
				t.Errorf("%s: %d %s, want %d field %s", c.path, code, body, c.code, c.field)
			}
		}
		if tk := f.region(us).task(t, id); tk.State != task.Running || tk.Result != "" {
			t.Errorf("after the refused reports %s is %s with result %q", id, tk.State, tk.Result)
		}
		f.waitState(us, tokSubmitterB, other, task.Success, 30*time.Second)
		if tk := f.region(us).task(t, other); tk.Worker == w.id {
			t.Errorf("team-b's %s was completed by the remote worker", other)
		}
	})

	t.Run("a vanished worker's task runs again", func(t *testing.T) {
		f := fed.on(t)
		waitUntil(t, 20*time.Second, "the remote worker to hold nothing", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.held) == 0
		})
		w.pause(t, true)
		gone := newRWorker(t, []string{f.region(us).servers[1].api}, workerTok, "team-a-gpu")
		id, _ := f.submit(us, tokSubmitterA, map[string]any{"type": "resize", "tags": gpu, "regions": []string{us}})
		var c apiv1.WorkerClaimResponse
		waitUntil(t, 20*time.Second, "the vanishing worker to claim "+id, func() bool {
			gone.call(http.MethodPost, "/v1/workers/"+gone.id+"/claim", apiv1.WorkerClaimRequest{Max: 1, WaitMS: 500}, &c)
			return len(c.Tasks) == 1
		})
		if c.Tasks[0].ID != id {
			t.Fatalf("claimed %s, want %s", c.Tasks[0].ID, id)
		}
		w.pause(t, false)
		tk := f.waitState(us, tokSubmitterA, id, task.Success, 30*time.Second)
		if tk.Attempts != 2 || tk.Worker != w.id {
			_, trail := f.call(us, tokSubmitterA, http.MethodGet, "/v1/tasks/"+id+"/trail", nil)
			t.Errorf("%s: %d attempts, last by %s (gone %s, worker %s): %s", id, tk.Attempts, tk.Worker, gone.id, w.id, trail)
		}
	})
	t.Run("its server dies mid-task", func(t *testing.T) {
		f := fed.on(t)
		id, _ := f.submit(us, tokSubmitterA, map[string]any{"type": "resize", "tags": gpu, "regions": []string{us}})
		slow.Store(id, false)
		waitUntil(t, 20*time.Second, "the remote worker to hold "+id, func() bool { return w.handed(id) == 1 })
		w.mu.Lock()
		first := w.urls[w.cur%len(w.urls)]
		w.mu.Unlock()
		for _, s := range f.region(us).servers {
			if s.api == first {
				s.kill()
			}
		}
		// It keeps the lease through the other server for longer than a lease.
		time.Sleep(2 * f.opts.lease)
		slow.Store(id, true)
		// Read from Redis: the harness's calls go to the dead server.
		var tk *task.Task
		waitUntil(t, 30*time.Second, id+" to succeed", func() bool {
			tk = f.region(us).task(t, id)
			return tk.State == task.Success
		})
		if tk.Attempts != 1 || w.handed(id) != 1 || tk.Worker != w.id {
			t.Errorf("%s: %d attempts, handed %d times", id, tk.Attempts, w.handed(id))
		}
	})

}

package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/remote"
)

// protocol is an in-memory server of the worker protocol: enough of it to
// check what the Go worker sends (the real server is tested in httpapi and
// internal/e2e).
type protocol struct {
	mu        sync.Mutex
	ready     []apiv1.WorkerTask
	leased    map[string]string // id -> lease
	results   map[string]json.RawMessage
	failures  map[string]apiv1.WorkerOutcome
	progress  map[string]apiv1.WorkerProgress
	workers   map[string]bool
	registers int
	deletes   int
	reports   int
	byReport  int               // tasks handed out by reports' claims
	stop      map[string]string // id -> reason, for the next report
	unavail   int               // answer this many requests 503 first
	n         int
}

func newProtocol() *protocol {
	return &protocol{leased: map[string]string{}, results: map[string]json.RawMessage{}, failures: map[string]apiv1.WorkerOutcome{},
		progress: map[string]apiv1.WorkerProgress{}, workers: map[string]bool{}, stop: map[string]string{}}
}

func (p *protocol) add(typ string, payload string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	id := fmt.Sprintf("t%d", p.n)
	p.ready = append(p.ready, apiv1.WorkerTask{ID: id, Type: typ, Payload: json.RawMessage(payload), Attempt: 1,
		Lease: "L" + id, Deadline: time.Now().Add(time.Minute), Tenant: "acme"})
	return id
}

func writeErr(w http.ResponseWriter, status int, code, field string) {
	w.Header().Set("Content-Type", "application/json")
	if status == 503 {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": code, "field": field})
}

func (p *protocol) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer wtok" {
		writeErr(w, 401, "unauthenticated", "")
		return
	}
	p.mu.Lock()
	if p.unavail > 0 {
		p.unavail--
		p.mu.Unlock()
		writeErr(w, 503, "unavailable", "")
		return
	}
	p.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/workers"), "/")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/workers":
		var reg apiv1.WorkerRegister
		_ = json.NewDecoder(r.Body).Decode(&reg)
		p.mu.Lock()
		p.registers++
		id := fmt.Sprintf("rw-%d", p.registers)
		p.workers[id] = true
		p.mu.Unlock()
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(apiv1.WorkerRegistered{WorkerID: id, Region: "eu-west", LeaseMS: 30000, HeartbeatMS: 10000, MaxWaitMS: 30000, MaxClaim: 256, MaxResultBytes: 1 << 16})
	case r.Method == http.MethodDelete:
		p.mu.Lock()
		p.deletes++
		delete(p.workers, parts[1])
		p.mu.Unlock()
		w.WriteHeader(204)
	case len(parts) == 3 && !p.known(parts[1]):
		writeErr(w, 404, "not_found", "worker_id")
	case len(parts) == 3 && parts[2] == "claim":
		var c apiv1.WorkerClaimRequest
		_ = json.NewDecoder(r.Body).Decode(&c)
		deadline := time.Now().Add(time.Duration(c.WaitMS) * time.Millisecond)
		for {
			p.mu.Lock()
			k := min(c.Max, len(p.ready))
			got := append([]apiv1.WorkerTask{}, p.ready[:k]...)
			p.ready = p.ready[k:]
			for _, t := range got {
				p.leased[t.ID] = t.Lease
			}
			p.mu.Unlock()
			if len(got) > 0 || time.Now().After(deadline) {
				_ = json.NewEncoder(w).Encode(apiv1.WorkerClaimResponse{Tasks: got})
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	case len(parts) == 3 && parts[2] == "report":
		var rep apiv1.WorkerReport
		_ = json.NewDecoder(r.Body).Decode(&rep)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.reports++
		for i, o := range rep.Outcomes {
			if len(o.Result) > 100 {
				writeErr(w, 413, "result_too_large", fmt.Sprintf("outcomes[%d].result", i))
				return
			}
		}
		ans := apiv1.WorkerReportResponse{Stop: []apiv1.WorkerStop{}}
		for _, o := range rep.Outcomes {
			if p.leased[o.ID] != o.Lease {
				ans.Outcomes = append(ans.Outcomes, apiv1.WorkerOutcomeResult{ID: o.ID, Code: "lease_lost", Message: "not yours"})
				continue
			}
			delete(p.leased, o.ID)
			if o.Status == apiv1.OutcomeSuccess {
				p.results[o.ID] = o.Result
			} else {
				p.failures[o.ID] = o
			}
			ans.Outcomes = append(ans.Outcomes, apiv1.WorkerOutcomeResult{ID: o.ID, OK: true})
		}
		for _, pr := range rep.Progress {
			p.progress[pr.ID] = pr
		}
		for id, why := range p.stop {
			ans.Stop = append(ans.Stop, apiv1.WorkerStop{ID: id, Reason: why})
			delete(p.stop, id)
			delete(p.leased, id)
		}
		if c := rep.Claim; c != nil {
			k := min(c.Max, len(p.ready))
			ans.Tasks = append([]apiv1.WorkerTask{}, p.ready[:k]...)
			p.ready = p.ready[k:]
			for _, t := range ans.Tasks {
				p.leased[t.ID] = t.Lease
			}
			p.byReport += k
		}
		_ = json.NewEncoder(w).Encode(ans)
	default:
		http.NotFound(w, r)
	}
}

func (p *protocol) known(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workers[id]
}

func (p *protocol) snapshot() (results map[string]json.RawMessage, failures map[string]apiv1.WorkerOutcome, progress map[string]apiv1.WorkerProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	results, failures, progress = map[string]json.RawMessage{}, map[string]apiv1.WorkerOutcome{}, map[string]apiv1.WorkerProgress{}
	for k, v := range p.results {
		results[k] = v
	}
	for k, v := range p.failures {
		failures[k] = v
	}
	for k, v := range p.progress {
		progress[k] = v
	}
	return
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run starts a worker over src with the test's handlers; the returned
// stop ends it and waits for Run.
func run(t *testing.T, src worker.Source, setup func(w *worker.Worker)) (stop func()) {
	t.Helper()
	w, err := worker.New(src, worker.Options{Pool: "acme-gpu", ID: "box-1", Concurrency: 8, Heartbeat: 50 * time.Millisecond,
		Logger: testLogger, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	setup(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestRemoteWorkerRunsTasks(t *testing.T) {
	p := newProtocol()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // the first URL refuses connections: the worker moves on
	live := httptest.NewServer(p)
	t.Cleanup(live.Close) // after the worker stopped (cleanups run last first)
	src, err := worker.Remote([]string{dead.URL, live.URL}, "wtok", remote.Options{ClaimWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ok := p.add("echo", `{"n":1}`)
	text := p.add("echo", `{"n":"plain"}`)
	bad := p.add("fail", ``)
	final := p.add("final", ``)
	big := p.add("big", ``)
	stop := run(t, src, func(w *worker.Worker) {
		w.Handle("echo", func(_ context.Context, tk *worker.Task) error {
			var in struct{ N any }
			if err := tk.Decode(&in); err != nil {
				return err
			}
			tk.SetProgress(150, "done with it")
			if s, isText := in.N.(string); isText {
				tk.SetResult(s)
			} else {
				tk.SetResult(`{"ok":true}`)
			}
			return nil
		})
		w.Handle("fail", func(context.Context, *worker.Task) error { return fmt.Errorf("boom") })
		w.Handle("final", func(context.Context, *worker.Task) error { return worker.NonRetryable(fmt.Errorf("never")) })
		w.Handle("big", func(_ context.Context, tk *worker.Task) error { tk.SetResult(strings.Repeat("x", 200)); return nil })
	})
	waitFor(t, "five outcomes", func() bool {
		r, f, _ := p.snapshot()
		return len(r)+len(f) == 4 // big is refused (413), so never recorded
	})
	waitFor(t, "progress", func() bool { _, _, pr := p.snapshot(); return len(pr) == 2 })
	stop()
	results, failures, progress := p.snapshot()
	if got := string(results[ok]); got != `{"ok":true}` {
		t.Errorf("result of %s = %s, want the JSON object", ok, got)
	}
	if got := string(results[text]); got != `"plain"` {
		t.Errorf("result of %s = %s, want a JSON string", text, got)
	}
	if f := failures[bad]; f.Status != apiv1.OutcomeFailure || f.Retry == nil || !*f.Retry || f.Error != "boom" {
		t.Errorf("failure of %s = %+v, want a retryable failure 'boom'", bad, f)
	}
	if f := failures[final]; f.Retry == nil || *f.Retry {
		t.Errorf("failure of %s = %+v, want retry:false", final, f)
	}
	if _, rec := results[big]; rec {
		t.Errorf("an oversized result was recorded")
	}
	if pr := progress[ok]; pr.Percent != 100 || pr.Message != "done with it" || pr.Lease != "L"+ok {
		t.Errorf("progress of %s = %+v, want 100%% 'done with it' with its lease", ok, pr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deletes != 1 || len(p.workers) != 0 {
		t.Errorf("deletes = %d, live registrations %v: want the worker to leave once", p.deletes, p.workers)
	}
}

func TestRemoteWorkerRegistersAgainAndStops(t *testing.T) {
	p := newProtocol()
	p.unavail = 2 // the first requests meet a 503 with Retry-After
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	src, err := remote.New([]string{srv.URL}, "wtok", remote.Options{ClaimWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 4)
	causes := make(chan error, 4)
	run(t, src, func(w *worker.Worker) {
		w.Handle("block", func(ctx context.Context, tk *worker.Task) error {
			started <- tk.ID
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
		w.Handle("noop", func(context.Context, *worker.Task) error { return nil })
	})
	id := p.add("block", "")
	<-started
	p.mu.Lock()
	p.stop[id] = apiv1.StopCanceled
	p.mu.Unlock()
	select {
	case c := <-causes:
		if c != worker.ErrCanceled {
			t.Errorf("cause = %v, want ErrCanceled", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stop did not reach the handler")
	}
	// The registration expires: the next call registers again and goes on.
	p.mu.Lock()
	clear(p.workers)
	p.mu.Unlock()
	after := p.add("noop", "")
	waitFor(t, "the task after re-registering", func() bool { r, _, _ := p.snapshot(); _, ok := r[after]; return ok })
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.registers != 2 {
		t.Errorf("registers = %d, want 2", p.registers)
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	for _, c := range []struct {
		urls  []string
		token string
	}{{nil, "t"}, {[]string{"ftp://x"}, "t"}, {[]string{"http://x"}, ""}, {[]string{"http://"}, "t"}} {
		if _, err := remote.New(c.urls, c.token, remote.Options{}); err == nil {
			t.Errorf("New(%v, %q) = nil error", c.urls, c.token)
		}
	}
	src, _ := remote.New([]string{"http://x"}, "t", remote.Options{})
	if _, err := worker.New(src, worker.Options{Pool: "p", Concurrency: 4, TypeConcurrency: map[string]int{"a": 1}}); err == nil {
		t.Error("TypeConcurrency accepted for a remote worker")
	}
}

var testLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestSaturatedWorkerClaimsWithItsReports: a worker whose slots are all
// busy asks for more tasks in the report that frees them; the tasks the
// report answers run, each once.
func TestSaturatedWorkerClaimsWithItsReports(t *testing.T) {
	p := newProtocol()
	live := httptest.NewServer(p)
	t.Cleanup(live.Close)
	src, err := worker.Remote([]string{live.URL}, "wtok", remote.Options{ClaimWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	for range n {
		p.add("work", `{}`)
	}
	var mu sync.Mutex
	runs := map[string]int{}
	w, err := worker.New(src, worker.Options{Pool: "acme-gpu", ID: "box-1", Concurrency: 2, Heartbeat: 50 * time.Millisecond,
		Logger: testLogger, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("work", func(_ context.Context, tk *worker.Task) error {
		mu.Lock()
		runs[tk.ID]++
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, "every outcome", func() bool { r, _, _ := p.snapshot(); return len(r) == n })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, k := range runs {
		if k != 1 {
			t.Errorf("%s ran %d times", id, k)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(runs) != n || p.byReport == 0 {
		t.Errorf("%d tasks ran, %d of them claimed by reports: want %d, some by reports", len(runs), p.byReport, n)
	}
	t.Logf("%d of %d tasks came with reports (%d reports)", p.byReport, n, p.reports)
}

// At the end of the grace the worker stops a handler and gives its task
// back only once the handler returned: another worker cannot start it
// while this one still runs it.
func TestStoppedHandlerGivesItsTaskBackOnceItReturned(t *testing.T) {
	p := newProtocol()
	live := httptest.NewServer(p)
	t.Cleanup(live.Close)
	src, err := worker.Remote([]string{live.URL}, "wtok", remote.Options{ClaimWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(src, worker.Options{Pool: "acme-gpu", ID: "box-1", Concurrency: 1, Heartbeat: 50 * time.Millisecond,
		Logger: testLogger, ShutdownGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var backWhileRunning atomic.Bool
	w.Handle("tidy", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		<-ctx.Done()
		time.Sleep(200 * time.Millisecond) // cleaning up after the stop
		_, failures, _ := p.snapshot()
		_, back := failures[tk.ID]
		backWhileRunning.Store(back)
		return ctx.Err()
	})
	id := p.add("tidy", `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, failures, _ := p.snapshot()
	if o := failures[id]; o.Status != apiv1.OutcomeReturn || backWhileRunning.Load() {
		t.Fatalf("outcome %+v, handed back while the handler ran: %v; want a return, after the handler returned", o, backWhileRunning.Load())
	}
}

package federation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// handOffCounter counts the hand-off requests a region's server receives
// (single-item and batch; and apart, the commit and status requests of the
// senders' word), and when the first one arrived.
type handOffCounter struct {
	single, batch atomic.Int64
	words         atomic.Int64 // commit and status requests
	mu            sync.Mutex
	first         time.Time
}

// count makes r's server count hand-off requests in c; then, when not nil,
// answer passes them on or answers them itself. It is removed at the
// test's end.
func (c *handOffCounter) install(t testing.TB, r *regionEnv, answer func(w http.ResponseWriter, req *http.Request, next http.Handler)) {
	intercept := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if !strings.HasPrefix(req.URL.Path, "/v1/internal/handoff") || req.Header.Get(apiv1.HeaderForwarded) == "" {
			next.ServeHTTP(w, req)
			return
		}
		c.mu.Lock()
		if c.first.IsZero() {
			c.first = time.Now()
		}
		c.mu.Unlock()
		switch req.URL.Path {
		case "/v1/internal/handoff":
			c.single.Add(1)
		case "/v1/internal/handoff/batch":
			c.batch.Add(1)
		default:
			c.words.Add(1) // commit and status: the sender's word, not a hand-off
		}
		if answer != nil {
			answer(w, req, next)
			return
		}
		next.ServeHTTP(w, req)
	}
	r.Intercept.Store(&intercept)
	t.Cleanup(func() { r.Intercept.Store(nil) })
}

func (c *handOffCounter) firstAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

// waitSettled waits until aws's outbox is empty and each of ids is
// HANDED_OFF (accepted) or READY (refused, placed again at home).
func waitSettled(t *testing.T, ctx context.Context, f *fed, ids []string) {
	t.Helper()
	fedtest.Eventually(t, 30*time.Second, "every hand-off answered and every refused task placed again", func() bool {
		if !f.OutboxEmpty(ctx) {
			return false
		}
		for _, id := range ids {
			tk, err := f.R(aws).Store.Get(ctx, id)
			if err != nil || tk.State != task.HandedOff && tk.State != task.Ready {
				return false
			}
		}
		return true
	})
}

// fillOutbox stores n tasks in from's outbox, bound for to's pool, as a
// placement in from would (straight into the store: the test controls
// when the sender runs). payload makes task i's payload.
func fillOutbox(t testing.TB, ctx context.Context, from *regionEnv, to, pool string, n int, payload func(i int) string) []string {
	t.Helper()
	var ids []string
	for start := 0; start < n; start += queue.MaxBatch {
		var batch []queue.NewTask
		for i := start; i < min(start+queue.MaxBatch, n); i++ {
			sp, err := task.DecodeSpec([]byte(`{"type":"handoff.bulk","tenant":"acme","tags":{"arch":"x86"},"payload":` + payload(i) + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
				t.Fatal(err)
			}
			batch = append(batch, queue.NewTask{Spec: sp, Pool: pool, HandOff: to})
		}
		res, err := from.Store.Submitter().Submit(ctx, batch...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// TestHandOffRate measures how fast one region hands a backlog of tasks to
// another (docs/benchmarks.md, "federation: cross-region hand-off"). It
// asserts nothing about time; it runs only when AX_HANDOFF_RATE is set (to
// the backlog size, e.g. 5000), as it takes a while on the single-item
// path:
//
//	AX_HANDOFF_RATE=5000 go test -count=1 -run TestHandOffRate -v ./federation/
func TestHandOffRate(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("AX_HANDOFF_RATE"))
	if n <= 0 {
		t.Skip("set AX_HANDOFF_RATE=<tasks> to measure the hand-off rate")
	}
	for _, mode := range []string{"batch", "single"} {
		t.Run(mode, func(t *testing.T) {
			// Room for the whole backlog: the receiver admits hand-offs
			// against its pool's hard watermark.
			f := newFed(t, fedtest.WithCapacity(az, poolSpot, 10*n))
			ctx := fedtest.Ctx(t)
			var c handOffCounter
			var answer func(w http.ResponseWriter, req *http.Request, next http.Handler)
			if mode == "single" {
				// An older receiver: no batch endpoint, so the sender falls
				// back to one request per task.
				answer = func(w http.ResponseWriter, req *http.Request, next http.Handler) {
					if req.URL.Path != "/v1/internal/handoff" {
						fedtest.WriteJSON(w, http.StatusNotFound, apiv1.ErrorBody{Error: apiv1.Error{Code: "not_found", Message: "no such endpoint"}})
						return
					}
					next.ServeHTTP(w, req)
				}
			}
			c.install(t, f.R(az), answer)
			// The sender is stopped while its outbox fills, so the backlog is
			// all there when it starts.
			f.R(aws).Stop()
			ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, n, func(i int) string {
				return fmt.Sprintf(`{"k":"%058d"}`, i) // 64 bytes
			})
			f.R(aws).Start()
			fedtest.Eventually(t, 10*time.Minute, "every hand-off answered", func() bool {
				ts, err := f.R(aws).Later.HandOffs().Outbox(ctx, 1)
				return err == nil && len(ts) == 0
			})
			took := time.Since(c.firstAt())
			checkHandedOffOnce(t, ctx, f, ids, aws, az)
			t.Logf("%s: %d tasks handed off in %v: %.0f tasks/s; %d single + %d batch requests",
				mode, n, took.Round(time.Millisecond), float64(n)/took.Seconds(), c.single.Load(), c.batch.Load())
		})
	}
}

// checkHandedOffOnce: every id is HANDED_OFF to dst in src and held once,
// by dst, across the regions.
func checkHandedOffOnce(t testing.TB, ctx context.Context, f *fed, ids []string, src, dst string) {
	t.Helper()
	for _, id := range ids {
		home, err := f.R(src).Store.Get(ctx, id)
		if err != nil || home.State != task.HandedOff || home.HandedOffTo != dst {
			t.Fatalf("home record of %s: %+v, %v", id, home, err)
		}
		if w := f.Where(ctx, id); len(w) != 1 || w[0] != dst {
			t.Fatalf("task %s lives in %v, want exactly [%s]", id, w, dst)
		}
	}
}

// handOffs is the sender's hand-off count of one outcome towards target.
func handOffs(r *regionEnv, target, outcome string) int {
	return int(fedtest.CounterValue(r.Server().Reg, "ax_handoffs_total", map[string]string{"region": r.Name, "target": target, "outcome": outcome}))
}

func payloadN(i int) string { return strconv.Itoa(i) }

// Issue: hand-offs go in batches. 2 500 tasks for one target land there
// exactly once, in far fewer requests than tasks: one wave of three batch
// requests in flight at once, whose word (commit) reaches the target for
// every task (each READY there).
func TestHandOffBatchLandsEveryTaskOnce(t *testing.T) {
	testenv.Slow(t)
	const n = 2500
	f := newFed(t, fedtest.WithCapacity(az, poolSpot, 4*n))
	ctx := fedtest.Ctx(t)
	var c handOffCounter
	c.install(t, f.R(az), nil)
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, n, payloadN)
	fedtest.Eventually(t, 30*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	checkHandedOffOnce(t, ctx, f, ids, aws, az)
	held, err := f.R(az).Store.Tasks().Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if held.Ready != n || held.ReadyBy[poolSpot][task.DefaultPriority] != n {
		t.Fatalf("the target holds %d READY (%v), want %d", held.Ready, held.ReadyBy, n)
	}
	for _, other := range []string{aws, gcp} {
		if c, _ := f.R(other).Store.Tasks().Counts(ctx); c.Ready != 0 {
			t.Fatalf("%s holds %d READY tasks", other, c.Ready)
		}
	}
	// Every task went in a batch request (at most apiv1.MaxBatch each), none alone.
	single, batch := c.single.Load(), c.batch.Load()
	if single != 0 || batch == 0 || batch > 5 {
		t.Fatalf("%d tasks took %d single and %d batch requests; want a few batches", n, single, batch)
	}
	// The server counts a request once its handler has returned, which may
	// be after the sender read the answer.
	served := func() float64 {
		return fedtest.CounterValue(f.R(az).Server().Reg, "ax_http_requests_total", map[string]string{"route": "POST /v1/internal/handoff/batch", "code": "200"})
	}
	fedtest.Eventually(t, 5*time.Second, "the target's metric counts every batch request", func() bool { return int64(served()) == batch })
	if got := handOffs(f.R(aws), az, "accepted"); got != n {
		t.Fatalf("ax_handoffs_total{outcome=accepted} = %d, want %d", got, n)
	}
	if got := handOffs(f.R(aws), az, "refused") + handOffs(f.R(aws), az, "retry"); got != 0 {
		t.Fatalf("%d refused or retried hand-offs, want none", got)
	}
	// The trail tells the story, read through the home region; the task
	// reads as held by the target.
	if tr := f.Trail(aws, tokAcme, ids[n-1]); !fedtest.HasReason(tr, task.ReasonHandedOff) {
		t.Fatalf("trail lacks HANDED_OFF: %+v", tr)
	}
	if tk, rep := f.GetTask(aws, tokAcme, ids[0]); rep.Status != http.StatusOK || tk.HeldBy != az || tk.State != task.Ready {
		t.Fatalf("GET through the home region: %d %+v", rep.Status, tk)
	}
}

// Words owed pile up while requests are in flight: three batches of a
// wave of four are answered (3 000 words owed; the fourth, still in
// flight, keeps them from going in a commit request of their own), then
// more tasks arrive. Their batch carries at most apiv1.MaxBatch words (the
// receiver refuses a larger commit, and with it the batch's tasks, which
// then went one request each); the rest follow in later requests. Every
// task lands once and READY, and no task goes alone.
func TestHandOffWordsOwedSpreadOverRequests(t *testing.T) {
	testenv.Slow(t)
	const wave, more = 4000, 500
	f := newFed(t, fedtest.WithCapacity(az, poolSpot, 4*(wave+more)))
	ctx := fedtest.Ctx(t)
	var c handOffCounter
	var mu sync.Mutex
	var commits []int
	gates := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})}
	c.install(t, f.R(az), func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.URL.Path != "/v1/internal/handoff/batch" {
			next.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(req.Body)
		var b apiv1.HandOffBatch
		if err != nil || json.Unmarshal(body, &b) != nil {
			t.Errorf("a batch request the test cannot read: %v", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		mu.Lock()
		i := len(commits)
		commits = append(commits, len(b.Commit))
		mu.Unlock()
		// The first wave's answers wait for the test.
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, req)
		if i < len(gates) {
			select {
			case <-gates[i]:
			case <-time.After(time.Minute):
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
	requests := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(commits)
	}
	handedOff := func(ids []string) int {
		k := 0
		for _, id := range ids {
			if tk, err := f.R(aws).Store.Get(ctx, id); err == nil && tk.State == task.HandedOff {
				k++
			}
		}
		return k
	}
	f.R(aws).Stop()
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, wave, payloadN)
	f.R(aws).Start()
	fedtest.Eventually(t, time.Minute, "the first wave's four batches at the target", func() bool { return requests() == len(gates) })
	for _, g := range gates[:3] {
		close(g)
	}
	fedtest.Eventually(t, time.Minute, "three batches recorded as handed off", func() bool { return handedOff(ids) == 3*apiv1.MaxBatch })
	ids = append(ids, fillOutbox(t, ctx, f.R(aws), az, poolSpot, more, payloadN)...)
	fedtest.Eventually(t, time.Minute, "the later tasks' batch at the target", func() bool { return requests() > len(gates) })
	close(gates[3])
	fedtest.Eventually(t, 2*time.Minute, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	checkHandedOffOnce(t, ctx, f, ids, aws, az)
	fedtest.Eventually(t, 30*time.Second, "every task READY at the target (its word arrived)", func() bool {
		c, err := f.R(az).Store.Tasks().Counts(ctx)
		return err == nil && c.Ready == wave+more
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d batch requests carrying %v words; %d single, %d word requests", c.batch.Load(), commits, c.single.Load(), c.words.Load())
	if single := c.single.Load(); single != 0 {
		t.Fatalf("%d tasks went one request each: a batch was refused", single)
	}
	for i, k := range commits {
		if k > apiv1.MaxBatch {
			t.Fatalf("batch request %d carried %d words, more than %d", i, k, apiv1.MaxBatch)
		}
	}
	if commits[len(gates)] == 0 {
		t.Fatalf("the later batch carried no words (%v): the test did not pile them up", commits)
	}
}

// Items the target refuses (here: a pool it does not have) are placed
// again by the sender; the rest of the batch is accepted.
func TestHandOffBatchRefusedItemsArePlacedAgain(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	var c handOffCounter
	var refusedItems atomic.Int64
	c.install(t, f.R(az), func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.URL.Path != "/v1/internal/handoff/batch" {
			next.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, req)
		var br apiv1.HandOffBatchResponse
		if rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &br) == nil {
			for i, it := range br.Results {
				if it.Error != nil {
					if it.Status != http.StatusUnprocessableEntity || it.Error.Code != apiv1.CodeUnplaceable ||
						it.Error.Field != fmt.Sprintf("items[%d].pool", i) || it.Error.Message == "" {
						t.Errorf("refused item %d: %d %+v", i, it.Status, *it.Error)
					}
					refusedItems.Add(1)
				}
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
	// The sender's figures are stale: it placed 30 tasks in a pool the
	// target no longer has.
	f.R(aws).Stop()
	good := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 270, payloadN)
	gone := fillOutbox(t, ctx, f.R(aws), az, "cpu-retired", 30, payloadN)
	f.R(aws).Start()
	waitSettled(t, ctx, f, gone)
	checkHandedOffOnce(t, ctx, f, good, aws, az)
	for _, id := range gone {
		if w := f.Where(ctx, id); len(w) != 1 {
			t.Fatalf("refused task %s lives in %v: want exactly one place", id, w)
		}
		tr, err := f.R(aws).Store.Tasks().Trail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !fedtest.HasReason(tr, task.ReasonHandOffRefused) {
			t.Fatalf("trail of %s lacks HANDOFF_REFUSED: %+v", id, tr)
		}
		if tk, _ := f.R(aws).Store.Get(ctx, id); tk.State == task.HandedOff && tk.Pool == "cpu-retired" {
			t.Fatalf("%s handed off into the retired pool: %+v", id, tk)
		}
	}
	if got := refusedItems.Load(); got != int64(len(gone)) {
		t.Fatalf("the target refused %d items, want %d", got, len(gone))
	}
	if got := handOffs(f.R(aws), az, "refused"); got != len(gone) {
		t.Fatalf("ax_handoffs_total{outcome=refused} = %d, want %d", got, len(gone))
	}
	if c.batch.Load() == 0 || c.single.Load()+c.batch.Load() > 20 {
		t.Fatalf("%d single and %d batch requests for %d tasks", c.single.Load(), c.batch.Load(), len(good)+len(gone))
	}
}

// A batch whose answer is lost (the target stored every task) is sent
// again, the same ids to the same target, and yields one copy of each.
func TestHandOffBatchAnswerLostMakesOneCopy(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	var c handOffCounter
	var dropped atomic.Bool
	c.install(t, f.R(az), func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.URL.Path == "/v1/internal/handoff/batch" && dropped.CompareAndSwap(false, true) {
			next.ServeHTTP(httptest.NewRecorder(), req)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		next.ServeHTTP(w, req)
	})
	f.R(aws).Stop()
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 200, payloadN)
	f.R(aws).Start()
	fedtest.Eventually(t, 30*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	checkHandedOffOnce(t, ctx, f, ids, aws, az)
	if !dropped.Load() || c.batch.Load() < 2 {
		t.Fatalf("%d batch requests; want the lost one and its retry", c.batch.Load())
	}
	if held, _ := f.R(az).Store.Tasks().Counts(ctx); held.Ready != len(ids) {
		t.Fatalf("the target holds %d READY, want %d", held.Ready, len(ids))
	}
	if got := handOffs(f.R(aws), az, "retry"); got < len(ids) {
		t.Fatalf("ax_handoffs_total{outcome=retry} = %d, want every task of the lost batch (%d)", got, len(ids))
	}
	if got := handOffs(f.R(aws), az, "accepted"); got != len(ids) {
		t.Fatalf("ax_handoffs_total{outcome=accepted} = %d, want %d", got, len(ids))
	}
}

// A target that is down, then back, gets every task once.
func TestHandOffTargetDownThenBack(t *testing.T) {
	testenv.Slow(t)
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	// First the target answers every batch with 503 (up, but failing), then
	// it is gone altogether.
	var failing atomic.Bool
	failing.Store(true)
	var c handOffCounter
	c.install(t, f.R(az), func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if failing.Load() {
			fedtest.WriteJSON(w, http.StatusServiceUnavailable, apiv1.ErrorBody{Error: apiv1.Error{Code: "unavailable", Message: "down for maintenance"}})
			return
		}
		next.ServeHTTP(w, req)
	})
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 300, payloadN)
	fedtest.Eventually(t, 10*time.Second, "the sender retried the failing target", func() bool { return c.batch.Load() >= 2 })
	f.R(az).Stop()
	if held, _ := f.R(az).Store.Tasks().Counts(ctx); held.Ready != 0 {
		t.Fatalf("the failing target stored %d tasks", held.Ready)
	}
	more := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 200, payloadN)
	time.Sleep(time.Second) // rounds against a target that is not there
	// The first tasks reached the target (its 503s): it may hold them, so
	// they wait for it. The later ones never got through (every dial
	// failed) while placement counts the target down: they wait for it, or,
	// after strandedAfter failed dials, are placed again (HANDOFF_REFUSED,
	// the region-loss rule) — which of the two depends on how fast this
	// machine runs the rounds, so both are right, each exactly once.
	for _, id := range ids {
		if tk, err := f.R(aws).Store.Get(ctx, id); err != nil || tk.State != task.Pending || tk.HandOffTarget != az {
			t.Fatalf("while the target is down %s is %+v, %v; want it waiting for the same target", id, tk, err)
		}
	}
	failing.Store(false)
	f.R(az).Start()
	fedtest.Eventually(t, 30*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	checkHandedOffOnce(t, ctx, f, ids, aws, az)
	atTarget := len(ids)
	for _, id := range more {
		w := f.Where(ctx, id)
		if len(w) != 1 {
			t.Fatalf("task %s lives in %v, want exactly one region", id, w)
		}
		if w[0] == az {
			atTarget++
		} else if tr, err := f.R(aws).Store.Tasks().Trail(ctx, id); err != nil || !hasReason(tr, task.ReasonHandOffRefused) {
			t.Fatalf("task %s went to %s without a HANDOFF_REFUSED step: %+v %v", id, w[0], tr, err)
		}
	}
	t.Logf("%d of the %d never-sent tasks waited for the target; the rest were placed again", atTarget-len(ids), len(more))
	if held, _ := f.R(az).Store.Tasks().Counts(ctx); held.Ready != atTarget {
		t.Fatalf("the target holds %d READY, want %d", held.Ready, atTarget)
	}
	if got := handOffs(f.R(aws), az, "accepted"); got != atTarget {
		t.Fatalf("ax_handoffs_total{outcome=accepted} = %d, want %d", got, atTarget)
	}
	if got := handOffs(f.R(aws), az, "refused"); got != 0 {
		t.Fatalf("%d hand-offs refused; a target that is down refuses nothing", got)
	}
	if handOffs(f.R(aws), az, "retry") == 0 {
		t.Fatal("no retry counted")
	}
}

func hasReason(tr []task.Transition, reason string) bool {
	for _, s := range tr {
		if s.Reason == reason {
			return true
		}
	}
	return false
}

// An older target (no batch endpoint) gets one task per request.
func TestHandOffBatchOlderTargetGetsSingleRequests(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	var c handOffCounter
	c.install(t, f.R(az), func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.URL.Path != "/v1/internal/handoff" {
			fedtest.WriteJSON(w, http.StatusNotFound, apiv1.ErrorBody{Error: apiv1.Error{Code: "not_found", Message: "no such endpoint: POST " + req.URL.Path}})
			return
		}
		next.ServeHTTP(w, req)
	})
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 40, payloadN)
	fedtest.Eventually(t, 30*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	more := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 40, payloadN)
	fedtest.Eventually(t, 30*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	checkHandedOffOnce(t, ctx, f, append(ids, more...), aws, az)
	// One batch try; then the sender remembers.
	if c.batch.Load() != 1 || c.single.Load() != int64(len(ids)+len(more)) {
		t.Fatalf("%d batch and %d single requests for %d tasks; want 1 and one per task", c.batch.Load(), c.single.Load(), len(ids)+len(more))
	}
	if got := handOffs(f.R(aws), az, "refused"); got != 0 {
		t.Fatalf("%d hand-offs refused", got)
	}
}

// The batch endpoint: the cluster token only; a request of the wrong shape
// is a 400 naming the field and stores nothing; item faults are answered
// per item, in the usual error shape, and the rest is accepted once.
func TestHandOffBatchEndpoint(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	url := f.R(az).URL() + "/v1/internal/handoff/batch"
	spec := func(extra string) json.RawMessage {
		return json.RawMessage(`{"type":"etl.step","tags":{"arch":"x86"}` + extra + `}`)
	}
	newID := func() string { return task.NewIDGen().New(aws, 0, time.Now()) }
	item := func(id string) apiv1.HandOff { return apiv1.HandOff{ID: id, Pool: poolSpot, Spec: spec("")} }
	stored := func() int {
		c, err := f.R(az).Store.Tasks().Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c.Ready + c.Pending
	}
	before := stored()
	okID := newID()

	t.Run("cluster token only", func(t *testing.T) {
		body := apiv1.HandOffBatch{Items: []apiv1.HandOff{item(okID)}}
		if e := f.Call(http.MethodPost, url, "", body).Want(t, http.StatusUnauthorized).Err(t); e.Code != apiv1.CodeUnauthorized {
			t.Fatalf("no token: %+v", e)
		}
		for _, tok := range []string{tokAdmin, tokOperator, tokAcme} {
			if e := f.Call(http.MethodPost, url, tok, body).Want(t, http.StatusForbidden).Err(t); e.Code != apiv1.CodeForbidden {
				t.Fatalf("%s: %+v", tok, e)
			}
		}
		if e := f.Call(http.MethodPost, url, tokUnknown, body).Want(t, http.StatusUnauthorized).Err(t); e.Code != apiv1.CodeUnauthorized {
			t.Fatalf("unknown token: %+v", e)
		}
	})

	t.Run("wrong shape: 400 naming the field, nothing stored", func(t *testing.T) {
		var tooMany []apiv1.HandOff
		for range apiv1.MaxBatch + 1 {
			tooMany = append(tooMany, item(newID()))
		}
		dupID := newID()
		for _, tc := range []struct {
			name  string
			body  any
			field string
		}{
			{"unknown field", `{"items":[{"id":"` + okID + `","pool":"cpu-spot","spec":{"type":"x"}}],"priority":1}`, "priority"},
			{"unknown item field", `{"items":[{"id":"` + okID + `","pool":"cpu-spot","spec":{"type":"x"}},{"id":"` + newID() + `","pool":"cpu-spot","spec":{"type":"x"},"region":"x"}]}`, "items[1].region"},
			{"item field of the wrong type", `{"items":[{"id":"` + okID + `","pool":7,"spec":{"type":"x"}}]}`, "items[0].pool"},
			{"item not an object", `{"items":["` + okID + `"]}`, "items[0]"},
			{"no items", apiv1.HandOffBatch{}, "items"},
			{"empty items", `{"items":[]}`, "items"},
			{"more than 1000 items", apiv1.HandOffBatch{Items: tooMany}, "items"},
			{"an id twice", apiv1.HandOffBatch{Items: []apiv1.HandOff{item(okID), item(dupID), item(dupID)}}, "items[2].id"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := f.Call(http.MethodPost, url, tokCluster, tc.body).Want(t, http.StatusBadRequest).Err(t)
				if e.Code != apiv1.CodeInvalid || e.Field != tc.field {
					t.Fatalf("error %+v, want code %s field %q", e, apiv1.CodeInvalid, tc.field)
				}
			})
		}
		if n := stored(); n != before {
			t.Fatalf("bad requests stored %d tasks", n-before)
		}
		for _, id := range []string{okID, dupID, tooMany[0].ID} {
			if _, err := f.R(az).Store.Get(ctx, id); !errors.Is(err, task.ErrNotFound) {
				t.Fatalf("%s after bad requests: %v, want not found", id, err)
			}
		}
	})

	t.Run("answers per item", func(t *testing.T) {
		badSpec, badPool, otherOK := newID(), newID(), newID()
		body := apiv1.HandOffBatch{Items: []apiv1.HandOff{
			item(okID),
			{ID: badSpec, Pool: poolSpot, Spec: spec(`,"priority":9`)},
			{ID: badPool, Pool: "cpu-retired", Spec: spec("")},
			{ID: "not-a-task-id", Pool: poolSpot, Spec: spec("")},
			item(otherOK),
		}}
		var br apiv1.HandOffBatchResponse
		f.Call(http.MethodPost, url, tokCluster, body).Want(t, http.StatusOK).JSON(t, &br)
		if br.Accepted != 2 || br.Refused != 3 || len(br.Results) != 5 {
			t.Fatalf("answer %+v", br)
		}
		for i, want := range []struct {
			status      int
			code, field string
		}{
			{http.StatusOK, "", ""},
			{http.StatusBadRequest, apiv1.CodeInvalid, "items[1].spec.priority"},
			{http.StatusUnprocessableEntity, apiv1.CodeUnplaceable, "items[2].pool"},
			{http.StatusBadRequest, apiv1.CodeInvalid, "items[3].id"},
			{http.StatusOK, "", ""},
		} {
			it := br.Results[i]
			if it.ID != body.Items[i].ID || it.Status != want.status {
				t.Fatalf("item %d: %+v, want status %d", i, it, want.status)
			}
			if want.code == "" {
				if !it.Accepted || it.Duplicate || it.Error != nil || it.State != string(task.Ready) {
					t.Fatalf("item %d: %+v, want accepted READY", i, it)
				}
				continue
			}
			if it.Accepted || it.Error == nil || it.Error.Code != want.code || it.Error.Field != want.field || it.Error.Message == "" {
				t.Fatalf("item %d: %+v (%+v), want %s on %s", i, it, it.Error, want.code, want.field)
			}
		}
		for _, id := range []string{okID, otherOK} {
			if tk, err := f.R(az).Store.Get(ctx, id); err != nil || tk.State != task.Ready || tk.Pool != poolSpot {
				t.Fatalf("accepted %s: %+v, %v", id, tk, err)
			}
		}
		for _, id := range []string{badSpec, badPool} {
			if _, err := f.R(az).Store.Get(ctx, id); !errors.Is(err, task.ErrNotFound) {
				t.Fatalf("refused %s: %v, want not found", id, err)
			}
		}
		// A repeat (the sender lost the answer) adds nothing: the ids held
		// are answered accepted again, as duplicates.
		var again apiv1.HandOffBatchResponse
		f.Call(http.MethodPost, url, tokCluster, apiv1.HandOffBatch{Items: []apiv1.HandOff{item(otherOK), item(okID)}}).
			Want(t, http.StatusOK).JSON(t, &again)
		for _, it := range again.Results {
			if !it.Accepted || !it.Duplicate || it.Status != http.StatusOK {
				t.Fatalf("repeat: %+v", it)
			}
		}
		if n := stored(); n != before+2 {
			t.Fatalf("the target stored %d tasks, want 2", n-before)
		}
		// The single-item endpoint agrees: the id is held.
		var hr apiv1.HandOffResponse
		f.Call(http.MethodPost, f.R(az).URL()+"/v1/internal/handoff", tokCluster, item(okID)).Want(t, http.StatusOK).JSON(t, &hr)
		if !hr.Accepted {
			t.Fatalf("single-item repeat: %+v", hr)
		}
	})
}

// A target that rejects the cluster token (403: tokens rotated or mistyped
// on one side) is a configuration fault, not a refusal of the tasks: they
// wait for the same target, never re-placed, and land once the tokens agree.
func TestHandOffForbiddenWaitsForTheSameTarget(t *testing.T) {
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	var forbidden atomic.Bool
	forbidden.Store(true)
	var c handOffCounter
	c.install(t, f.R(az), func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if forbidden.Load() {
			fedtest.WriteJSON(w, http.StatusForbidden, apiv1.ErrorBody{Error: apiv1.Error{Code: "forbidden", Message: "not the cluster token"}})
			return
		}
		next.ServeHTTP(w, req)
	})
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, 50, payloadN)
	fedtest.Eventually(t, 10*time.Second, "the sender tried twice", func() bool { return c.batch.Load()+c.single.Load() >= 2 })
	for _, id := range ids {
		tk, err := f.R(aws).Store.Get(ctx, id)
		if err != nil || tk.State != task.Pending || tk.HandOffTarget != az {
			t.Fatalf("while forbidden %s is %+v, %v; want it waiting for the same target", id, tk, err)
		}
	}
	if got := handOffs(f.R(aws), az, "refused"); got != 0 {
		t.Fatalf("%d hand-offs counted as refused", got)
	}
	forbidden.Store(false)
	fedtest.Eventually(t, 60*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	checkHandedOffOnce(t, ctx, f, ids, aws, az)
}

// loseAnswers makes r's server store the hand-offs it gets and lose every
// answer (the connection drops mid-answer) while lose is set.
func loseAnswers(t testing.TB, r *regionEnv, c *handOffCounter, lose *atomic.Bool) {
	c.install(t, r, func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if !lose.Load() || (req.URL.Path != "/v1/internal/handoff" && req.URL.Path != "/v1/internal/handoff/batch") {
			next.ServeHTTP(w, req)
			return
		}
		next.ServeHTTP(httptest.NewRecorder(), req)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close()
	})
}

// A hand-off that reached its target, whose every answer was lost, to a
// target that then goes away: the target held it unrun (it waits for the
// sender's word); past the horizon the sender places it again
// (HANDOFF_REVOKED), and the target, back, drops its copy. The task lives
// in exactly one region: it can run only once.
func TestHandOffRevokedPastTheHorizonLivesOnce(t *testing.T) {
	testenv.Slow(t)
	f := newFed(t, fedtest.WithHandOffHorizon(300*time.Millisecond))
	ctx := fedtest.Ctx(t)
	var c handOffCounter
	var lose atomic.Bool
	lose.Store(true)
	loseAnswers(t, f.R(az), &c, &lose)
	const n = 20
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, n, payloadN)
	fedtest.Eventually(t, 10*time.Second, "the target stored every hand-off", func() bool {
		held, err := f.R(az).Store.HandOffs().Held(ctx, time.Now().Add(time.Hour), 1000)
		return err == nil && len(held) == n
	})
	if cnt, _ := f.R(az).Store.Tasks().Counts(ctx); cnt.Ready != 0 {
		t.Fatalf("the target made %d held hand-offs READY without the sender's word", cnt.Ready)
	}
	f.R(az).Stop()
	fedtest.Eventually(t, 20*time.Second, "every task placed again at home", func() bool {
		for _, id := range ids {
			tk, err := f.R(aws).Store.Get(ctx, id)
			if err != nil || tk.HandOffTarget == az || tk.State == task.HandedOff && tk.HandedOffTo == az {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if tr, err := f.R(aws).Store.Tasks().Trail(ctx, id); err != nil || !hasReason(tr, task.ReasonHandOffRevoked) {
			t.Fatalf("task %s placed again without a HANDOFF_REVOKED step: %+v %v", id, tr, err)
		}
	}
	lose.Store(false)
	f.R(az).Start()
	fedtest.Eventually(t, 20*time.Second, "the target dropped its held copies", func() bool {
		held, err := f.R(az).Store.HandOffs().Held(ctx, time.Now().Add(time.Hour), 1000)
		return err == nil && len(held) == 0
	})
	fedtest.Eventually(t, 20*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	for _, id := range ids {
		if w := f.Where(ctx, id); len(w) != 1 || w[0] == az {
			t.Fatalf("task %s lives in %v, want one region, not the one that was away", id, w)
		}
		if _, err := f.R(az).Store.Get(ctx, id); !errors.Is(err, task.ErrNotFound) {
			if tk, _ := f.R(az).Store.Get(ctx, id); tk == nil || tk.State != task.HandedOff {
				t.Fatalf("the target kept %s: %+v", id, tk)
			}
		}
	}
	if got := handOffs(f.R(aws), az, "revoked"); got != n {
		t.Fatalf("ax_handoffs_total{outcome=revoked} = %d, want %d", got, n)
	}
}

// A commit that never arrives: the target asks the sender for its word and
// runs the tasks (the sender recorded them as handed off).
func TestHandOffCommitLostIsAskedFor(t *testing.T) {
	testenv.Slow(t)
	f := newFed(t)
	ctx := fedtest.Ctx(t)
	var c handOffCounter
	c.install(t, f.R(az), func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.URL.Path == "/v1/internal/handoff/commit" {
			fedtest.WriteJSON(w, http.StatusServiceUnavailable, apiv1.ErrorBody{Error: apiv1.Error{Code: "unavailable", Message: "lost"}})
			return
		}
		next.ServeHTTP(w, req)
	})
	const n = 30
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, n, payloadN)
	fedtest.Eventually(t, 10*time.Second, "every hand-off answered", func() bool { return f.OutboxEmpty(ctx) })
	fedtest.Eventually(t, 10*time.Second, "the target released them on the sender's word", func() bool {
		cnt, err := f.R(az).Store.Tasks().Counts(ctx)
		return err == nil && cnt.Ready == n
	})
	checkHandedOffOnce(t, ctx, f, ids, aws, az)
	if c.words.Load() == 0 {
		t.Fatal("no commit or status request seen")
	}
	if tr := f.Trail(aws, tokAcme, ids[0]); !fedtest.HasReason(tr, task.ReasonCommitted) {
		t.Fatalf("trail lacks COMMITTED: %+v", tr)
	}
}

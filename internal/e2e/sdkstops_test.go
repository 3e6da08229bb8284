package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// sdkWorkers starts remote workers of one SDK running its gated worker
// program (testdata/sdkgated.py, clients/typescript/test/e2e-gated-worker.ts)
// and reads what they ran.
type sdkWorkers struct {
	f           *federation
	sdk, pool   string
	bin         string
	args        []string
	env         []string
	runs, gates string
	procs       map[string]*proc // by worker name
}

// start starts worker name with grace seconds for its handlers at SIGTERM
// and 4 slots.
func (s *sdkWorkers) start(name string, grace int) *proc {
	s.f.t.Helper()
	return s.startSlots(name, grace, 4)
}

// startSlots is start with slots.
func (s *sdkWorkers) startSlots(name string, grace, slots int) *proc {
	s.f.t.Helper()
	env := append(append([]string{}, s.env...), "AX_E2E_NAME="+name, fmt.Sprintf("AX_E2E_GRACE=%d", grace),
		fmt.Sprintf("AX_E2E_SLOTS=%d", slots))
	p := s.f.procs.startBin(s.bin, "us-east-1/"+s.sdk+"-"+name, env, s.args...)
	s.procs[name] = p
	return p
}

// open lets the gated task id through its gate.
func (s *sdkWorkers) open(id string) {
	s.f.t.Helper()
	if err := os.WriteFile(filepath.Join(s.gates, id), nil, 0o600); err != nil {
		s.f.t.Fatal(err)
	}
}

// sdkRun is one line of a gated worker's runs file: a handler started,
// passed its gate (done) or saw its stop (stopped).
type sdkRun struct {
	Ev      string  `json:"ev"`
	ID      string  `json:"id"`
	Attempt int     `json:"attempt"`
	Worker  string  `json:"worker"`
	Slots   float64 `json:"slots"`
}

// ran is what the workers did with task id, in order: "start A 1",
// "done A 1", ...
func (s *sdkWorkers) ran(id string) []string {
	s.f.t.Helper()
	var out []string
	for _, r := range s.all() {
		if r.ID == id {
			out = append(out, fmt.Sprintf("%s %s %d", r.Ev, r.Worker, r.Attempt))
		}
	}
	return out
}

// all is the runs file's lines, in order.
func (s *sdkWorkers) all() []sdkRun {
	s.f.t.Helper()
	fh, err := os.Open(s.runs)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		s.f.t.Fatal(err)
	}
	defer fh.Close()
	var out []sdkRun
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var r sdkRun
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue // a line being written
		}
		out = append(out, r)
	}
	return out
}

// startedOn waits until a worker started task id and returns which.
func (s *sdkWorkers) startedOn(id string) string {
	s.f.t.Helper()
	var who string
	waitUntil(s.f.t, 30*time.Second, "a "+s.sdk+" worker to start "+id, func() bool {
		for _, r := range s.ran(id) {
			if f := strings.Fields(r); f[0] == "start" {
				who = f[1]
				return true
			}
		}
		return false
	})
	return who
}

// Remote workers of the Python and the TypeScript SDK, as a team running
// its own compute meets them: auth on, two regions of two servers, each
// SDK's workers holding only us-east-1's two API URLs and a worker token
// scoped to tenant team-a and the SDK's own pool of team-a.
//
// Stopped (SIGTERM) with two tasks in flight, a worker finishes the one
// that ends within its grace (after the signal) and hands back the one that
// does not, which another worker then runs to SUCCESS: nothing is lost.
// Killed (SIGKILL) mid-task — a task handed to us-east-1 from eu-west-1 —
// the task's lease runs out and it runs again on the other worker, which
// ends it SUCCESS; it passed its gate exactly once. Busy in its only slot,
// a worker gets a task handed off from eu-west-1 in the answer to the
// report of the outcome that frees the slot (a report claim). A worker of
// one slot runs four tasks of slots 0.25 at once (one handed off from
// eu-west-1), never a fifth beside them.
func TestSDKWorkersKilledAndStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a two-region federation and SDK workers")
	}
	t.Parallel()
	py := pythonSDK(t)
	tsDir := typescriptSDK(t)
	secret := map[string]string{"py-workers": "pw-" + randomHex(16), "ts-workers": "tw-" + randomHex(16)}
	var tokens strings.Builder
	for name, pool := range map[string]string{"py-workers": "py", "ts-workers": "ts"} {
		fmt.Fprintf(&tokens, "- {name: %s, token_sha256: %s, role: worker, tenants: [team-a], pools: [%s], types: [sdk.gated]}\n",
			name, sha256Hex(secret[name]), pool)
	}
	// Both regions declare the pools (a worker token names pools of its
	// region's file); only us-east-1's have workers.
	pools := "- {name: cpu, tags: {class: cpu}, slots: 8, price_per_slot_hour: 0.04}\n" +
		"- {name: py, tags: {class: py}, slots: 8, price_per_slot_hour: 0.04, tenants: [team-a]}\n" +
		"- {name: ts, tags: {class: ts}, slots: 8, price_per_slot_hour: 0.04, tenants: [team-a]}"
	f := newFederation(t, fedOpts{servers: 2, noWorkers: true, tokens: tokens.String(),
		pools:    map[string]string{"us-east-1": pools, "eu-west-1": pools},
		unserved: map[string][]string{"us-east-1": {"cpu"}, "eu-west-1": {"cpu", "py", "ts"}}})
	us := f.region("us-east-1")
	urls := "AX_URL=" + us.servers[0].api + "," + us.servers[1].api
	script, _ := filepath.Abs(filepath.Join("testdata", "sdkgated.py"))
	sdks := []*sdkWorkers{
		{sdk: "python", pool: "py", bin: py, args: []string{script},
			env: []string{"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", urls,
				"AX_TOKEN=" + secret["py-workers"], "AX_POOL=py"}},
		{sdk: "typescript", pool: "ts", bin: "node", args: []string{filepath.Join(tsDir, "dist", "test", "e2e-gated-worker.js")},
			env: []string{"PATH=" + os.Getenv("PATH"), urls, "AX_TOKEN=" + secret["ts-workers"], "AX_POOL=ts"}},
	}
	// The two SDKs' workers serve pools of their own: their cases run side
	// by side.
	for _, s := range sdks {
		t.Run(s.sdk, func(t *testing.T) {
			t.Parallel()
			if s.sdk == "typescript" {
				typescriptDist(t)
			}
			s.f, s.procs = f.on(t), map[string]*proc{}
			dir := t.TempDir()
			s.runs, s.gates = filepath.Join(dir, "runs.jsonl"), filepath.Join(dir, "gates")
			if err := os.Mkdir(s.gates, 0o700); err != nil {
				t.Fatal(err)
			}
			s.env = append(s.env, "AX_E2E_RUNS="+s.runs, "AX_E2E_GATES="+s.gates)
			sdkStops(t, s.f, s)
			sdkKill(t, s.f, s)
			sdkReportClaim(t, s.f, s)
			sdkPacks(t, s.f, s)
		})
	}
}

// gatedSpec is a task of team-a for s's pool in us-east-1 that waits at its
// gate.
func (s *sdkWorkers) gatedSpec(n int) map[string]any {
	return map[string]any{"type": "sdk.gated", "tags": map[string]string{"class": s.pool}, "regions": []string{"us-east-1"},
		"max_retries": 2, "payload": map[string]any{"n": n, "gate": true}}
}

// sdkStops: SIGTERM of worker A holding two tasks: "quick" passes its gate
// after the signal, within A's grace, and succeeds on A; "long" does not: A
// stops its handler as its grace ends, hands the task back (WORKER_SHUTDOWN)
// once the handler noted the stop and returned, and exits 0; worker B then
// runs it to SUCCESS.
func sdkStops(t *testing.T, f *federation, s *sdkWorkers) {
	a := s.start("A", 5)
	waitPools(f, map[string][]string{"us-east-1": {s.pool}})
	quick, _ := f.submit("us-east-1", tokSubmitterA, s.gatedSpec(1))
	long, _ := f.submit("us-east-1", tokSubmitterA, s.gatedSpec(2))
	for _, id := range []string{quick, long} {
		if who := s.startedOn(id); who != "A" {
			t.Fatalf("task %s started on %s, want A (the only worker)", id, who)
		}
	}
	s.start("B", 10)
	a.signal(syscall.SIGTERM)
	waitUntil(t, 10*time.Second, "worker A to begin its shutdown", func() bool { return strings.Contains(a.log.String(), "stopping") })
	s.open(quick)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("worker A still runs 20 s after SIGTERM:\n%s", tail(a.log.String(), 3000))
	}
	if !a.cmd.ProcessState.Success() || !strings.Contains(a.log.String(), "sdkgated exited") {
		t.Fatalf("worker A exited %v after SIGTERM:\n%s", a.cmd.ProcessState, tail(a.log.String(), 3000))
	}
	tq := f.waitState("us-east-1", tokSubmitterA, quick, task.Success, 10*time.Second)
	if got := strings.Join(s.ran(quick), ", "); got != "start A 1, done A 1" || tq.Attempts != 1 || tq.Result != `{"n":1,"worker":"A"}` {
		t.Fatalf("quick task %s: ran %q, %d attempts, result %q; want it run once on A within its grace", quick, got, tq.Attempts, tq.Result)
	}
	if who := s.startedOnAgain(long, "B"); who != "B" {
		t.Fatalf("long task %s handed back by A started again on %s, want B", long, who)
	}
	s.open(long)
	tl := f.waitState("us-east-1", tokSubmitterA, long, task.Success, 20*time.Second)
	// A hands the task back only once its stopped handler returned: it
	// never runs on A and B at once.
	ran := s.ran(long)
	if len(ran) != 4 || ran[0] != "start A 1" || ran[1] != "stopped A 1" || !strings.HasPrefix(ran[2], "start B ") ||
		!strings.HasPrefix(ran[3], "done B ") || tl.Result != `{"n":2,"worker":"B"}` {
		t.Fatalf("long task %s: ran %q, result %q; want started on A, stopped at its grace, run to the end on B", long, ran, tl.Result)
	}
	if !hasReason(f.trail("us-east-1", tokSubmitterA, long), task.ReasonWorkerShutdown) {
		t.Fatalf("long task %s: no %s in its trail: %+v", long, task.ReasonWorkerShutdown, f.trail("us-east-1", tokSubmitterA, long))
	}
	t.Logf("%s: SIGTERM: quick ran once on A, long handed back by A and run on B (%d attempts)", s.sdk, tl.Attempts)
}

// sdkKill: a task handed to us-east-1 from eu-west-1 starts on one of
// workers B and C; that one is SIGKILLed at the gate; the lease runs out
// and the other runs the task to SUCCESS on its second attempt, read from
// both regions.
func sdkKill(t *testing.T, f *federation, s *sdkWorkers) {
	s.start("C", 10)
	h := f.handedOffTask("eu-west-1", "us-east-1", tokSubmitterA, s.gatedSpec(3))
	first := s.startedOn(h.ID)
	victim := s.procs[first]
	waitUntil(t, 10*time.Second, "the progress of "+h.ID+" through GET", func() bool {
		tk, code := f.getTask("us-east-1", tokSubmitterA, h.ID)
		return code == 200 && tk.Progress != nil && tk.Progress.Percent == 50
	})
	victim.kill()
	killed := time.Now()
	s.open(h.ID)
	tk := f.waitState("eu-west-1", tokSubmitterA, h.ID, task.Success, 30*time.Second)
	other := map[string]string{"B": "C", "C": "B"}[first]
	ran := s.ran(h.ID)
	want := []string{"start " + first + " 1", "start " + other + " 2", "done " + other + " 2"}
	if strings.Join(ran, ", ") != strings.Join(want, ", ") || tk.Attempts != 2 || tk.Result != fmt.Sprintf(`{"n":3,"worker":%q}`, other) {
		t.Fatalf("task %s after worker %s's SIGKILL: ran %q, %d attempts, result %q; want %q, 2 attempts, run to the end once on %s",
			h.ID, first, ran, tk.Attempts, tk.Result, want, other)
	}
	if !hasReason(f.trail("us-east-1", tokSubmitterA, h.ID), task.ReasonHeartbeatLost) {
		t.Fatalf("task %s: no %s in its trail", h.ID, task.ReasonHeartbeatLost)
	}
	t.Logf("%s: SIGKILL of %s mid-task: SUCCESS on %s %v later", s.sdk, first, other, time.Since(killed).Round(time.Millisecond))
}

// sdkReportClaim: worker D, the pool's only one, with one slot, runs a
// gated task; a task handed to us-east-1 from eu-west-1 waits READY; the
// gate opens, and D gets the handed-off task in the answer to the report
// of the gated task's outcome: ax_remote_worker_claims_total of the pool
// counts it with route="report", none with route="claim". It runs once,
// on D, and is SUCCESS read from eu-west-1.
func sdkReportClaim(t *testing.T, f *federation, s *sdkWorkers) {
	for name, p := range s.procs {
		select {
		case <-p.done:
		default:
			p.stop()
			if !p.cmd.ProcessState.Success() {
				t.Fatalf("worker %s exited %v after SIGTERM:\n%s", name, p.cmd.ProcessState, tail(p.log.String(), 3000))
			}
		}
	}
	us := f.region("us-east-1")
	claimed := func(route string) float64 {
		n := 0.0
		for _, srv := range us.servers {
			n += metricWhere(t, srv.api, "ax_remote_worker_claims_total", fmt.Sprintf("pool=%q", s.pool), fmt.Sprintf("route=%q", route))
		}
		return n
	}
	s.startSlots("D", 10, 1)
	waitPools(f, map[string][]string{"us-east-1": {s.pool}})
	busy, _ := f.submit("us-east-1", tokSubmitterA, s.gatedSpec(4))
	if who := s.startedOn(busy); who != "D" {
		t.Fatalf("task %s started on %s, want D (the only worker)", busy, who)
	}
	byClaim, byReport := claimed("claim"), claimed("report")
	spec := s.gatedSpec(5)
	spec["payload"] = map[string]any{"n": 5}
	h := f.handedOffTask("eu-west-1", "us-east-1", tokSubmitterA, spec)
	waitUntil(t, 10*time.Second, "handed-off task "+h.ID+" READY in us-east-1", func() bool {
		tk, err := us.store.Get(context.Background(), h.ID)
		return err == nil && tk.State == task.Ready
	})
	s.open(busy)
	f.waitState("us-east-1", tokSubmitterA, busy, task.Success, 10*time.Second)
	tk := f.waitState("eu-west-1", tokSubmitterA, h.ID, task.Success, 20*time.Second)
	if got := strings.Join(s.ran(h.ID), ", "); got != "start D 1, done D 1" || tk.Attempts != 1 || tk.Result != `{"n":5,"worker":"D"}` {
		t.Fatalf("handed-off task %s: ran %q, %d attempts, result %q; want run once on D", h.ID, got, tk.Attempts, tk.Result)
	}
	if dc, dr := claimed("claim")-byClaim, claimed("report")-byReport; dc != 0 || dr != 1 {
		t.Fatalf("pool %s: %v tasks handed out by the claim route and %v by report claims while D ran %s and then %s; want 0 and 1",
			s.pool, dc, dr, busy, h.ID)
	}
	t.Logf("%s: handed-off task %s reached busy worker D in a report's answer", s.sdk, h.ID)
}

// startedOnAgain waits until worker who started task id (after another
// worker did) and returns who started it last.
func (s *sdkWorkers) startedOnAgain(id, who string) string {
	s.f.t.Helper()
	var last string
	waitUntil(s.f.t, 30*time.Second, "worker "+who+" to start "+id, func() bool {
		for _, r := range s.ran(id) {
			if f := strings.Fields(r); f[0] == "start" {
				last = f[1]
			}
		}
		return last == who
	})
	return last
}

func hasReason(tr []task.Transition, reason string) bool {
	for _, x := range tr {
		if x.Reason == reason {
			return true
		}
	}
	return false
}

// sdkPacks: worker D, the pool's only one, with one slot, is handed four
// gated tasks of slots 0.25 (one handed to us-east-1 from eu-west-1) and
// runs them at once, each handler seeing slots 0.25; a fifth quarter task
// starts only after one of the four passed its gate. By the runs file, D
// never ran more than four at once. Meanwhile GET /v1/regions, from a
// server of each region, shows the pool running 4 tasks in 1 slot unit:
// utilisation 1, not 4.
func sdkPacks(t *testing.T, f *federation, s *sdkWorkers) {
	quarter := func(n int) map[string]any {
		sp := s.gatedSpec(n)
		sp["slots"] = 0.25
		return sp
	}
	h := f.handedOffTask("eu-west-1", "us-east-1", tokSubmitterA, quarter(10))
	ids := []string{h.ID}
	for n := 11; n < 14; n++ {
		id, _ := f.submit("us-east-1", tokSubmitterA, quarter(n))
		ids = append(ids, id)
	}
	for _, id := range ids {
		if who := s.startedOn(id); who != "D" {
			t.Fatalf("quarter task %s started on %s, want D (the only worker)", id, who)
		}
	}
	poolShowsOneSlotBusy(t, f, s.pool)
	fifth, _ := f.submit("us-east-1", tokSubmitterA, quarter(14))
	waitUntil(t, 10*time.Second, "quarter task "+fifth+" READY in us-east-1", func() bool {
		tk, err := f.region("us-east-1").store.Get(context.Background(), fifth)
		return err == nil && tk.State == task.Ready
	})
	s.open(ids[0])
	if who := s.startedOn(fifth); who != "D" {
		t.Fatalf("quarter task %s started on %s, want D", fifth, who)
	}
	for _, id := range append(ids[1:], fifth) {
		s.open(id)
	}
	for _, id := range append(ids, fifth) {
		tk := f.waitState("eu-west-1", tokSubmitterA, id, task.Success, 20*time.Second)
		if tk.Slots != 0.25 || tk.Attempts != 1 || tk.HeldBy != "us-east-1" {
			t.Fatalf("quarter task %s: slots %v, %d attempts, held by %s; want 0.25, 1, us-east-1", id, tk.Slots, tk.Attempts, tk.HeldBy)
		}
	}
	quarters := map[string]bool{fifth: true}
	for _, id := range ids {
		quarters[id] = true
	}
	now, most, fifthAt, firstDone := 0, 0, -1, -1
	for i, r := range s.all() {
		if !quarters[r.ID] {
			continue
		}
		if r.Slots != 0.25 {
			t.Fatalf("the handler of %s saw slots %v, want 0.25", r.ID, r.Slots)
		}
		switch r.Ev {
		case "start":
			now++
			if r.ID == fifth {
				fifthAt = i
			}
		case "done", "stopped":
			now--
			if firstDone < 0 {
				firstDone = i
			}
		}
		most = max(most, now)
	}
	if most != 4 || fifthAt < firstDone {
		t.Fatalf("worker D of one slot ran at most %d quarter tasks at once (want 4); the fifth started at line %d, the first ended at %d",
			most, fifthAt, firstDone)
	}
	t.Logf("%s: one slot ran four quarter tasks at once (one handed off), the fifth after one ended", s.sdk)
}

// poolShowsOneSlotBusy waits until GET /v1/regions, from a server of each
// region, shows us-east-1's pool (one worker of one slot, four quarter
// tasks running) with 4 running, running_slots 1 and utilisation 1.
func poolShowsOneSlotBusy(t *testing.T, f *federation, pool string) {
	t.Helper()
	for _, via := range []string{"us-east-1", "eu-west-1"} {
		var last string
		ok := func() bool {
			code, body := f.call(via, tokOperator, http.MethodGet, "/v1/regions", nil)
			if code != http.StatusOK {
				t.Fatalf("GET /v1/regions on %s: %d %s", via, code, body)
			}
			var res apiv1.RegionsResponse
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Regions {
				for _, p := range r.Pools {
					if r.Name == "us-east-1" && p.Name == pool {
						last = fmt.Sprintf("slots %d, running %d, running_slots %v, utilisation %v", p.Slots, p.Running, p.RunningSlots, p.Utilisation)
						return p.Slots == 1 && p.Running == 4 && p.RunningSlots == 1 && p.Utilisation == 1
					}
				}
			}
			return false
		}
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s's /v1/regions shows us-east-1/%s with %s; want slots 1, running 4, running_slots 1, utilisation 1", via, pool, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// cliSeen is a request the fake API received.
type cliSeen struct {
	Method, Path, Query, Body, Auth string
}

// cliFakeAPI serves canned answers by "METHOD /path" and records every
// request; an unknown route is a JSON 404.
type cliFakeAPI struct {
	srv    *httptest.Server
	mu     sync.Mutex
	seen   []cliSeen
	routes map[string]func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newCLIFakeAPI(t *testing.T) *cliFakeAPI {
	t.Helper()
	f := &cliFakeAPI{routes: map[string]func(http.ResponseWriter, *http.Request, []byte){}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, cliSeen{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("Authorization")})
		h := f.routes[r.Method+" "+r.URL.Path]
		f.mu.Unlock()
		if h == nil {
			cliReply(w, 404, `{"error":{"code":"not_found","message":"no route `+r.Method+" "+r.URL.Path+`"}}`)
			return
		}
		h(w, r, b)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// on answers route with a fixed status and body.
func (f *cliFakeAPI) on(route string, status int, body string) *cliFakeAPI {
	return f.handle(route, func(w http.ResponseWriter, _ *http.Request, _ []byte) { cliReply(w, status, body) })
}

func (f *cliFakeAPI) handle(route string, h func(http.ResponseWriter, *http.Request, []byte)) *cliFakeAPI {
	f.mu.Lock()
	f.routes[route] = h
	f.mu.Unlock()
	return f
}

func (f *cliFakeAPI) requests() []cliSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cliSeen(nil), f.seen...)
}

func cliReply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// cliResult is one run of the root command.
type cliResult struct {
	stdout, stderr string
	err            error
	code           int // the process exit status main would use
}

// cliExec runs `ax args...` against the fake, with stdin.
func cliExec(t *testing.T, ctx context.Context, f *cliFakeAPI, stdin string, args ...string) cliResult {
	t.Helper()
	if ctx == nil {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ctx = c
	}
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"--api", f.srv.URL, "--token", "tok", "--settings="}, args...))
	err := root.ExecuteContext(ctx)
	res := cliResult{stdout: out.String(), stderr: errb.String(), err: err}
	if err != nil {
		var rep bytes.Buffer
		res.code = report(&rep, err)
		if strings.Count(rep.String(), "\n") != 1 {
			t.Errorf("error is not one line: %q", rep.String())
		}
	}
	return res
}

func TestCLISubmitPrintsID(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/tasks", 201, `{"id":"eu1-0-abc","state":"READY","region":"eu-west","pool":"cpu"}`)
	r := cliExec(t, nil, f, "", "submit", "--type", "report.generate", "--payload", `{"day": 1}`,
		"--priority", "0", "--tag", "gpu=a100", "--tag", "class=spot", "--region", "eu-west",
		"--region", "us-east", "--delay", "10m", "--max-retries", "0", "--idempotency-key", "k1",
		"--preemptible", "--tenant", "acme", "--timeout", "90s")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.stdout != "eu1-0-abc\n" {
		t.Errorf("stdout %q, want the id alone", r.stdout)
	}
	if !strings.Contains(r.stderr, "READY in eu-west/cpu") {
		t.Errorf("stderr %q", r.stderr)
	}
	seen := f.requests()
	if len(seen) != 1 || seen[0].Auth != "Bearer tok" {
		t.Fatalf("requests %+v", seen)
	}
	spec, err := task.DecodeSpec([]byte(seen[0].Body))
	if err != nil {
		t.Fatalf("body %s: %v", seen[0].Body, err)
	}
	if spec.Type != "report.generate" || string(spec.Payload) != `{"day":1}` || *spec.Priority != 0 ||
		spec.Tags["gpu"] != "a100" || spec.Tags["class"] != "spot" || fmt.Sprint(spec.Regions) != "[eu-west us-east]" ||
		time.Duration(spec.Delay) != 10*time.Minute || *spec.MaxRetries != 0 || spec.IdempotencyKey != "k1" ||
		!spec.Preemptible || spec.Critical || spec.Tenant != "acme" || time.Duration(spec.Timeout) != 90*time.Second {
		t.Errorf("spec sent: %s", seen[0].Body)
	}
}

func TestCLISubmitLeavesDefaultsToTheServer(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/tasks", 200, `{"id":"t1","state":"PENDING","region":"eu-west","pool":null}`)
	r := cliExec(t, nil, f, "", "submit", "--type", "a")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if body := f.requests()[0].Body; body != `{"type":"a"}` {
		t.Errorf("body %s, want only the type", body)
	}
	if !strings.Contains(r.stderr, "earlier submit") {
		t.Errorf("a 200 is not reported as a duplicate: %q", r.stderr)
	}
}

func TestCLISubmitJSONOutput(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/tasks", 200, `{"id":"t1","state":"PENDING","region":"eu-west","pool":null}`)
	r := cliExec(t, nil, f, "", "-o", "json", "submit", "--type", "a", "--idempotency-key", "k")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var got apiv1.SubmitResponse
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	if got.ID != "t1" || got.Pool != nil || !got.Duplicate {
		t.Errorf("got %+v", got)
	}
	if r.stderr != "" {
		t.Errorf("stderr %q, want nothing besides the JSON", r.stderr)
	}
}

func TestCLIServerErrorIsOneLine(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/tasks", 400,
		`{"error":{"code":"invalid_argument","message":"payload: larger than 1024 bytes","field":"payload"}}`)
	r := cliExec(t, nil, f, "", "submit", "--type", "a", "--payload", `"x"`)
	if r.code != 1 {
		t.Fatalf("exit %d (%v), want 1", r.code, r.err)
	}
	if want := "payload: larger than 1024 bytes (field payload)"; r.err.Error() != want {
		t.Errorf("error %q, want %q", r.err, want)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q", r.stdout)
	}
}

func TestCLIUnplaceableShowsTheExplanation(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/tasks", 422, `{"error":{"code":"unplaceable","message":"no pool matches the task's tags and regions",
		"explanation":{"outcome":"UNPLACEABLE","candidates":[{"region":"eu-west","pool":"cpu","rejected":"TAG_MISMATCH","detail":"gpu"}]}}}`)
	r := cliExec(t, nil, f, "", "submit", "--type", "a", "--tag", "gpu=h100")
	if r.code != 1 || !strings.Contains(r.err.Error(), "no pool matches") {
		t.Fatalf("exit %d: %v", r.code, r.err)
	}
	if !strings.Contains(r.stderr, "TAG_MISMATCH: gpu") || !strings.Contains(r.stderr, "outcome: UNPLACEABLE") {
		t.Errorf("stderr lacks the explanation:\n%s", r.stderr)
	}
}

// Bad values are refused before any request, with exit status 2.
func TestCLIRejectsBadInputBeforeAnyRequest(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--type", "a", "--tag", "gpu"}, `"--tag" flag`},
		{[]string{"submit", "--type", "a", "--tag", "GPU=x"}, "(field tags.GPU)"},
		{[]string{"submit", "--type", "a", "--delay", "soon"}, `"--delay" flag`},
		{[]string{"submit", "--type", "a", "--delay", "-1m"}, "--delay -1m0s: must not be negative"},
		{[]string{"submit", "--type", "a", "--priority", "5"}, "--priority 5: must be between 0 and 4"},
		{[]string{"submit", "--type", "a", "--priority", "-1"}, "--priority -1"},
		{[]string{"submit", "--type", "a", "--payload", "{nope"}, "--payload is not valid JSON"},
		{[]string{"submit", "--type", "a", "--run-at", "tomorrow"}, "--run-at"},
		{[]string{"submit", "--type", "a", "--run-at", "2030-01-01T00:00:00Z", "--delay", "1m"}, "not both"},
		{[]string{"submit", "--type", "a", "--trace-id", "xyz"}, "(field trace_id)"},
		{[]string{"submit", "--type", "a", "--region", "EU West"}, "(field regions[0])"},
		{[]string{"submit"}, "--type is required"},
		{[]string{"submit", "-f", "-", "--type", "a"}, "give -f or --type"},
		{[]string{"submit", "--type", "a", "-o", "yaml"}, `--output "yaml"`},
		{[]string{"submit", "--type", "a", "extra"}, "unknown command"},
		{[]string{"explain", "--tag", "k=v"}, "--type is required"},
		{[]string{"get"}, "accepts 1 arg(s)"},
		{[]string{"priority", "t1", "high"}, `priority "high"`},
		{[]string{"priority", "t1", "9"}, `priority "9"`},
		{[]string{"cancel"}, "give task ids or a filter"},
		{[]string{"cancel", "t1", "--type", "a"}, "not both"},
		{[]string{"cancel", "--state", "RUNNING"}, "want PENDING or READY"},
		{[]string{"dlq", "list", "--limit", "0"}, "--limit"},
		{[]string{"dlq", "replay"}, "give dead letters' ids, or choose them"},
		{[]string{"dlq", "replay", "a", "--type", "x"}, "not both"},
		{[]string{"dlq", "replay", "--since", "yesterday"}, "want a duration back from now"},
		{[]string{"dlq", "replay", "--all", "--max", "0"}, "--max must be at least 1"},
		{[]string{"dag", "submit"}, "-f FILE is required"},
		{[]string{"dag", "submit", "-f", "-"}, "stdin: not valid JSON"},
		{[]string{"schedule", "create", "-f", "/nonexistent/s.json"}, "no such file"},
		{[]string{"tail", "--wait", "0s"}, "--wait"},
		{[]string{"tail", "--wait", "500ms"}, "want between 1s and"},
		{[]string{"tail", "--wait", "2m"}, "want between 1s and"},
		{[]string{"--api", "ftp://x", "regions"}, "--api"},
		// A group's unknown subcommand is an error, not its help and exit 0.
		{[]string{"dag", "create", "-f", "-"}, `unknown command "create" for "ax dag"`},
		{[]string{"dlq", "ls"}, `unknown command "ls" for "ax dlq"`},
		{[]string{"schedule", "show", "x"}, `unknown command "show" for "ax schedule"`},
		{[]string{"nosuch"}, `unknown command "nosuch" for "ax"`},
		// A subcommand's flags without the subcommand: not the group's help, exit 0.
		{[]string{"tasks", "--state", "RUNNING"}, `unknown flag: --state: "ax tasks" needs a subcommand`},
		{[]string{"schedule", "-f", "s.json"}, `"ax schedule" needs a subcommand`},
		{[]string{"--bogus"}, `unknown flag: --bogus`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := newCLIFakeAPI(t)
			r := cliExec(t, nil, f, "{nope", tc.args...)
			if r.code != 2 {
				t.Errorf("exit %d (%v), want 2", r.code, r.err)
			}
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", r.err, tc.want)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

// batchAPI accepts every spec in POST /v1/tasks/batch, except type "bad"
// (400 on the field) and type "dup" (200, an earlier task).
func batchAPI(t *testing.T) *cliFakeAPI {
	calls := 0
	return newCLIFakeAPI(t).handle("POST /v1/tasks/batch", func(w http.ResponseWriter, _ *http.Request, body []byte) {
		calls++
		var req apiv1.BatchRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("batch body: %v", err)
		}
		var resp apiv1.BatchResponse
		for i, raw := range req.Tasks {
			var s task.Spec
			_ = json.Unmarshal(raw, &s)
			item := apiv1.BatchItem{Status: 201, Task: &apiv1.SubmitResponse{ID: fmt.Sprintf("c%d-%d", calls, i), State: task.Ready}}
			switch s.Type {
			case "bad":
				item = apiv1.BatchItem{Status: 409, Error: &apiv1.Error{Code: "conflict", Message: "idempotency key reused with a different spec", Field: fmt.Sprintf("tasks[%d].idempotency_key", i)}}
			case "dup":
				item.Status = 200
			}
			if item.Status < 300 {
				resp.Accepted++
			} else {
				resp.Rejected++
			}
			resp.Results = append(resp.Results, item)
		}
		b, _ := json.Marshal(resp)
		cliReply(w, 200, string(b))
	})
}

// specsFile is n JSON lines; line numbers (1-based) in bad and dup get
// those types; a blank line follows line 10.
func specsFile(n int, bad, dup map[int]bool) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		typ := "ok"
		switch {
		case bad[i]:
			typ = "bad"
		case dup[i]:
			typ = "dup"
		}
		fmt.Fprintf(&b, `{"type":%q,"payload":{"i":%d},"idempotency_key":"k%d"}`+"\n", typ, i, i)
		if i == 10 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func TestCLISubmitFileInBatches(t *testing.T) {
	for _, viaStdin := range []bool{false, true} {
		t.Run(fmt.Sprintf("stdin=%v", viaStdin), func(t *testing.T) {
			f := batchAPI(t)
			// Spec 1800 sits on file line 1801 (the blank line after 10).
			data := specsFile(2500, map[int]bool{1800: true}, map[int]bool{3: true})
			path, stdin := t.TempDir()+"/tasks.jsonl", ""
			if viaStdin {
				path, stdin = "-", data
			} else if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			r := cliExec(t, nil, f, stdin, "submit", "-f", path)
			seen := f.requests()
			var sizes []int
			for _, s := range seen {
				var br apiv1.BatchRequest
				_ = json.Unmarshal([]byte(s.Body), &br)
				sizes = append(sizes, len(br.Tasks))
			}
			if fmt.Sprint(sizes) != "[1000 1000 500]" {
				t.Errorf("batch sizes %v, want [1000 1000 500]", sizes)
			}
			if !strings.Contains(r.stdout, "2500 tasks sent: 2498 new, 1 duplicate, 1 rejected") {
				t.Errorf("summary:\n%s", r.stdout)
			}
			if !strings.Contains(r.stdout, "line 1801:") || !strings.Contains(r.stdout, "idempotency key reused with a different spec (field idempotency_key)") {
				t.Errorf("per-line errors:\n%s", r.stdout)
			}
			if r.code != 1 || !strings.Contains(r.err.Error(), "1 of 2500 tasks rejected") {
				t.Errorf("exit %d: %v", r.code, r.err)
			}
			if r.stderr != "" { // not a terminal: no progress bar
				t.Errorf("stderr %q", r.stderr)
			}
		})
	}
}

func TestCLISubmitFileJSONOutput(t *testing.T) {
	f := batchAPI(t)
	r := cliExec(t, nil, f, specsFile(3, nil, nil), "submit", "-f", "-", "-o", "json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var got apiv1.BatchResponse
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Results) != 3 || got.Accepted != 3 {
		t.Errorf("stdout %s (%v)", r.stdout, err)
	}
}

func TestCLISubmitFileRefusesBadLinesBeforeSending(t *testing.T) {
	f := batchAPI(t)
	data := `{"type":"ok"}` + "\n" + `{"type":"ok","priority":9}` + "\n" + `not json` + "\n" + `{"type":"ok","tags":"gpu"}` + "\n"
	r := cliExec(t, nil, f, data, "submit", "-f", "-")
	if r.code != 2 || !strings.Contains(r.err.Error(), "3 invalid line(s); nothing was submitted") {
		t.Fatalf("exit %d: %v", r.code, r.err)
	}
	for _, want := range []string{"line 2: must be between 0 and 4 (field priority)", "line 3: not a JSON object", "line 4: must be map[string]string (field tags)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestCLISubmitFileStopsAtAFailedBatch(t *testing.T) {
	calls := 0
	f := newCLIFakeAPI(t).handle("POST /v1/tasks/batch", func(w http.ResponseWriter, _ *http.Request, body []byte) {
		calls++
		if calls == 2 {
			cliReply(w, 500, `{"error":{"code":"internal","message":"redis down"}}`)
			return
		}
		var req apiv1.BatchRequest
		_ = json.Unmarshal(body, &req)
		resp := apiv1.BatchResponse{Accepted: len(req.Tasks)}
		for range req.Tasks {
			resp.Results = append(resp.Results, apiv1.BatchItem{Status: 201, Task: &apiv1.SubmitResponse{ID: "x"}})
		}
		b, _ := json.Marshal(resp)
		cliReply(w, 200, string(b))
	})
	r := cliExec(t, nil, f, specsFile(1500, nil, nil), "submit", "-f", "-")
	if r.code != 1 || !strings.Contains(r.err.Error(), "lines 1002–1501 not submitted") || !strings.Contains(r.err.Error(), "redis down") {
		t.Fatalf("exit %d: %v", r.code, r.err)
	}
	if !strings.Contains(r.stdout, "1000 tasks sent: 1000 new") {
		t.Errorf("summary:\n%s", r.stdout)
	}
}

const explainAnswer = `{"outcome":"PLACED",
 "chosen":{"region":"us-east","pool":"gpu-spot","price_per_slot_hour":1.2,"expected_seconds":300,"base_cost":0.1,"watermark_penalty":1,"score":0.1,"chosen":true},
 "candidates":[
  {"region":"eu-west","pool":"cpu","rejected":"TAG_MISMATCH","detail":"no tag gpu","price_per_slot_hour":0.05},
  {"region":"eu-west","pool":"gpu","price_per_slot_hour":2.4,"expected_seconds":300,"base_cost":0.2,"watermark_penalty":1.5,"cross_region_penalty":0.01,"score":0.31},
  {"region":"us-east","pool":"gpu-spot","price_per_slot_hour":1.2,"expected_seconds":300,"base_cost":0.1,"watermark_penalty":1,"score":0.1,"chosen":true},
  {"region":"ap-south","pool":"gpu","rejected":"SATURATED","price_per_slot_hour":0.9,"expected_seconds":300,"base_cost":0.075,"watermark_penalty":4,"score":0.3,"queue_fill":0.97},
  {"region":"ap-south","pool":"old","rejected":"STALE_STATUS","price_per_slot_hour":0.1}]}`

func TestCLIExplainTable(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/placement/explain", 200, explainAnswer)
	r := cliExec(t, nil, f, "", "explain", "--type", "render", "--tag", "gpu=a100")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 7 { // header, 5 candidates, outcome
		t.Fatalf("%d lines:\n%s", len(lines), r.stdout)
	}
	for _, col := range []string{"REGION", "POOL", "PRICE", "EXP.DURATION", "COST", "PENALTY", "SCORE", "STATUS"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %s: %q", col, lines[0])
		}
	}
	// The chosen pool first and marked; eligible by score; rejected with
	// their reason codes.
	for i, want := range []string{
		"* us-east gpu-spot $1.2/h 5m0s $0.1/task ×1 $0.1 CHOSEN",
		"eu-west gpu $2.4/h 5m0s $0.2/task ×1.5 +$0.01 $0.31 ok",
		"eu-west cpu $0.05/h - - - - TAG_MISMATCH: no tag gpu",
		"ap-south gpu $0.9/h 5m0s $0.075/task ×4 $0.3 SATURATED",
		"ap-south old $0.1/h - - - - STALE_STATUS",
		"outcome: PLACED in us-east/gpu-spot (score $0.1)",
	} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); got != want {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, got, want)
		}
	}
	if body := f.requests()[0].Body; body != `{"type":"render","tags":{"gpu":"a100"}}` {
		t.Errorf("spec sent: %s", body)
	}
}

// Tiny figures keep their digits; an unplaceable task prints why and
// exits non-zero, as does a saturated one.
func TestCLIExplainPrecisionAndExit(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/placement/explain", 200, `{"outcome":"UNPLACEABLE","candidates":[
  {"region":"eu-west","pool":"cpu","rejected":"TAG_MISMATCH","detail":"needs gpu=a100; the pool has no gpu","price_per_slot_hour":0.00528}]}`)
	r := cliExec(t, nil, f, "", "explain", "--type", "render", "--tag", "gpu=a100")
	if r.err == nil || !strings.Contains(r.err.Error(), "unplaceable") {
		t.Fatalf("exit: %v\n%s", r.err, r.stdout)
	}
	if !strings.Contains(r.stdout, "$0.00528/h") || !strings.Contains(r.stdout, "TAG_MISMATCH: needs gpu=a100; the pool has no gpu") {
		t.Errorf("table:\n%s", r.stdout)
	}
	f = newCLIFakeAPI(t).on("POST /v1/placement/explain", 200, `{"outcome":"SATURATED","candidates":[
  {"region":"eu-west","pool":"cpu","rejected":"SATURATED","detail":"0.96 fill ≥ 0.95 hard watermark","price_per_slot_hour":0.048,
   "expected_seconds":0.0092,"base_cost":0.000000122666,"watermark_penalty":4,"score":0.000000490666}]}`)
	r = cliExec(t, nil, f, "", "explain", "--type", "render")
	if r.err == nil || !strings.Contains(r.stdout, "$0.000000122666/task") || !strings.Contains(r.stdout, "$0.000000490666") ||
		!strings.Contains(r.stdout, "0.96 fill ≥ 0.95 hard watermark") {
		t.Errorf("saturated: %v\n%s", r.err, r.stdout)
	}
}

func TestCLIExplainFromFile(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/placement/explain", 200, explainAnswer)
	r := cliExec(t, nil, f, `{"type":"render","regions":["eu-west"]}`, "explain", "-f", "-", "-o", "json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var ex apiv1.Explanation
	if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil || len(ex.Candidates) != 5 {
		t.Errorf("stdout %s (%v)", r.stdout, err)
	}
	if body := f.requests()[0].Body; body != `{"type":"render","regions":["eu-west"]}` {
		t.Errorf("spec sent: %s", body)
	}
}

func TestCLIRegionsTable(t *testing.T) {
	f := newCLIFakeAPI(t).on("GET /v1/regions", 200, `{"global_view":false,"regions":[
	 {"name":"eu-west","provider":"gcp","leader":"srv-1","healthy":true,"servers":2,"pools":[
	  {"name":"cpu","slots":16,"running":12,"ready":30,"wait_p99_seconds":0.034,"queue_fill":0.3,"price_per_slot_hour":0.04,"spot":false},
	  {"name":"gpu-spot","slots":3,"worker_slots":8,"running":3,"ready":95,"parked":7,"starving":40,"wait_p99_seconds":1.2345,"queue_fill":0.95,"price_per_slot_hour":1.1,"spot":true,"paused":true,
	   "capacity_window":{"open":true,"slots":3,"window":"20:00–08:00","timezone":"Europe/Berlin","next_change":"2026-12-08T07:00:00Z"}},
	  {"name":"day","slots":3,"worker_slots":4,"queue_fill":0,"price_per_slot_hour":0.01,"capacity_window":{"open":true,"slots":3,"window":"00:00–24:00","timezone":"UTC"}},
	  {"name":"night","slots":0,"worker_slots":4,"queue_fill":0,"price_per_slot_hour":0.01,"capacity_window":{"open":false,"slots":0,"timezone":"UTC","next_change":"2026-12-08T20:00:00Z"}}]},
	 {"name":"us-east","leader":"","healthy":false,"stale":true,"pools":[]}]}`)
	r := cliExec(t, nil, f, "", "regions")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := []string{
		"REGION PROVIDER LEADER SERVERS HEALTHY POOL SLOTS RUNNING READY PARKED STARVING WAIT-P99 FILL PRICE $/SLOT-H SPOT WINDOW",
		"eu-west gcp srv-1 2 yes cpu 16 12 30 0 0 34ms 30.0% 0.040 no -",
		"eu-west gcp srv-1 2 yes gpu-spot 3 of 8 3 95 7 40 1.235s 95.0% paused 1.100 yes open: 3 slots until 08:00 Europe/Berlin",
		"eu-west gcp srv-1 2 yes day 3 of 4 0 0 0 0 - 0.0% 0.010 no open: 3 slots all day",
		"eu-west gcp srv-1 2 yes night 0 of 4 0 0 0 0 - 0.0% 0.010 no closed until 20:00 UTC",
		"us-east - - 0 stale - - - - - - - - - - -",
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", r.stdout)
	}
	for i := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, got, want[i])
		}
	}
	if !strings.Contains(r.stderr, "last known view") {
		t.Errorf("no warning about the global view: %q", r.stderr)
	}
}

// Every other command: the request it makes, and what it prints.
func TestCLICommands(t *testing.T) {
	task := `{"id":"t1","type":"report.generate","state":"FAILED","reason":"RETRIES_EXHAUSTED","priority":1,"tenant":"acme",
	  "region":"eu-west","held_by":"ap-south","pool":"cpu","attempts":5,"max_retries":4,"tags":{"gpu":"a100"},"last_error":"boom","created_at":"2026-01-02T03:04:05Z",
	  "timeout":"30m0s","retry_base":"300ms","retry_cap":"30s","trace_id":"0af7651916cd43dd8448eb211c80319c"}`
	cases := []struct {
		name     string
		args     []string
		route    string
		status   int
		answer   string
		stdin    string
		wantReq  cliSeen // Method and Path always; Query and Body when set
		wantOut  []string
		notOut   []string // in table mode
		wantCode int
	}{
		{name: "get", args: []string{"get", "t1"}, route: "GET /v1/tasks/t1", answer: task,
			wantReq: cliSeen{Method: "GET", Path: "/v1/tasks/t1"},
			wantOut: []string{"State:", "FAILED (RETRIES_EXHAUSTED)", "Attempts:", "5 of 5", "gpu=a100", "Last error:", "boom",
				"Held by:        ap-south", "Created:        2026-01-02T03:04:05.000Z"}},
		{name: "get --local", args: []string{"get", "t1", "--local"}, route: "GET /v1/tasks/t1", answer: task,
			wantReq: cliSeen{Method: "GET", Path: "/v1/tasks/t1"},
			wantOut: []string{"Created:        " + time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Local().Format("2006-01-02T15:04:05.000Z07:00")}},
		{name: "get not found", args: []string{"get", "nope"}, route: "GET /v1/tasks/nope", status: 404,
			answer:  `{"error":{"code":"not_found","message":"task nope not found"}}`,
			wantReq: cliSeen{Method: "GET", Path: "/v1/tasks/nope"}, wantCode: 1},
		{name: "trail", args: []string{"trail", "t1"}, route: "GET /v1/tasks/t1/trail",
			answer: `{"id":"t1","transitions":[{"ts":"2026-01-02T03:04:05Z","to":"PENDING","reason":"SUBMITTED","attempt":0},
			  {"ts":"2026-01-02T03:04:06Z","from":"RUNNING","to":"PENDING","reason":"HANDLER_ERROR","by":"w1","attempt":1,"error":"boom"}]}`,
			wantReq: cliSeen{Method: "GET", Path: "/v1/tasks/t1/trail"},
			wantOut: []string{"TIME", "REGION", "REASON", "SUBMITTED", "RUNNING", "HANDLER_ERROR", "w1", "boom", "2026-01-02T03:04:06.000Z"}},
		{name: "cancel", args: []string{"cancel", "t1"}, route: "POST /v1/tasks/t1/cancel",
			answer:  `{"id":"t1","state":"RUNNING","requested":true}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/tasks/t1/cancel"},
			wantOut: []string{"t1", "RUNNING", "cancel requested"}},
		{name: "bulk cancel", args: []string{"cancel", "--type", "x", "--state", "ready", "--tenant", "acme"}, route: "POST /v1/tasks/cancel",
			answer:  `{"canceled":12}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/tasks/cancel", Body: `{"type":"x","state":"READY","tenant":"acme"}`},
			wantOut: []string{"canceled 12 tasks"}},
		{name: "dlq list", args: []string{"dlq", "list", "--type", "report.generate", "--tenant", "acme", "--limit", "1"}, route: "GET /v1/dlq",
			answer:  `{"tasks":[` + task + `]}`,
			wantReq: cliSeen{Method: "GET", Path: "/v1/dlq", Query: "limit=1&tenant=acme&type=report.generate"},
			wantOut: []string{"ID", "REGION", "LAST ERROR", "t1", "report.generate", "acme", "boom"}},
		{name: "dlq replay", args: []string{"dlq", "replay", "t1"}, route: "POST /v1/tasks/t1/replay",
			answer:  `{"id":"t1","state":"PENDING"}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/tasks/t1/replay"},
			wantOut: []string{"t1", "PENDING", "replayed"}},
		{name: "priority", args: []string{"priority", "t1", "0"}, route: "POST /v1/tasks/t1/priority",
			answer:  `{"id":"t1","state":"READY","priority":0}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/tasks/t1/priority", Body: `{"priority":0}`},
			wantOut: []string{"t1", "READY", "priority 0"}},
		// A RUNNING task takes the change: it keeps running (docs/architecture.md §7).
		{name: "priority of a running task", args: []string{"priority", "t1", "3"}, route: "POST /v1/tasks/t1/priority",
			answer:  `{"id":"t1","state":"RUNNING","priority":3}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/tasks/t1/priority", Body: `{"priority":3}`},
			wantOut: []string{"t1", "RUNNING", "priority 3 (keeps running: preemption and a retry use it)"}},
		{name: "priority of a finished task", args: []string{"priority", "t1", "3"}, route: "POST /v1/tasks/t1/priority", status: 409,
			answer:  `{"error":{"code":"failed_precondition","message":"cannot change the priority of task t1 in state SUCCESS","field":"state"}}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/tasks/t1/priority"}, wantCode: 1},
		{name: "region drain", args: []string{"region", "drain", "eu-west"}, route: "POST /v1/regions/eu-west/drain",
			answer:  `{"region":"eu-west","moved":42}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/regions/eu-west/drain"},
			wantOut: []string{"drained eu-west: 42 READY tasks moved"}},
		{name: "dag submit", args: []string{"dag", "submit", "-f", "-"}, route: "POST /v1/dags", status: 201,
			stdin:   `{"nodes":[{"id":"a","type":"x"},{"id":"b","type":"y","depends_on":["a"]}]}`,
			answer:  `{"id":"dag-1","state":"RUNNING"}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/dags", Body: `{"nodes":[{"id":"a","type":"x"},{"id":"b","type":"y","depends_on":["a"]}]}`},
			wantOut: []string{"dag-1"}},
		{name: "dag submit with a cycle", args: []string{"dag", "submit", "-f", "-"}, route: "POST /v1/dags", status: 400,
			stdin:   `{"nodes":[]}`,
			answer:  `{"error":{"code":"invalid_argument","message":"cycle: a -> b -> a","field":"nodes"}}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/dags"}, wantCode: 1},
		{name: "dag ls", args: []string{"dag", "ls", "--state", "running", "--limit", "5"}, route: "GET /v1/dags",
			answer:  `{"runs":[{"id":"dag-1","name":"nightly","tenant":"acme","region":"eu-west-1","state":"RUNNING","created_at":"2026-01-02T03:04:05Z","nodes":{"SUCCESS":2,"RELEASED":1}}],"next_cursor":"c2"}`,
			wantReq: cliSeen{Method: "GET", Path: "/v1/dags", Query: "limit=5&state=RUNNING"},
			wantOut: []string{"HOME", "dag-1", "nightly", "eu-west-1", "1 RELEASED, 2 SUCCESS"}},
		{name: "dag get", args: []string{"dag", "get", "dag-1"}, route: "GET /v1/dags/dag-1",
			answer:  `{"id":"dag-1","state":"RUNNING","nodes":[{"id":"a","state":"SUCCESS","task_id":"t7"},{"id":"b","state":"PENDING","depends_on":["a"]}]}`,
			wantReq: cliSeen{Method: "GET", Path: "/v1/dags/dag-1"},
			wantOut: []string{"DAG dag-1", "NODE", "SUCCESS", "t7", "[a]"}},
		{name: "dag cancel", args: []string{"dag", "cancel", "dag-1"}, route: "POST /v1/dags/dag-1/cancel",
			answer: `{"id":"dag-1","state":"RUNNING","cancel_requested_at":"2026-01-02T03:04:05Z","nodes":[{"id":"a","state":"SUCCESS","task_state":"SUCCESS"},
			  {"id":"b","state":"RELEASED","task_state":"RUNNING"},{"id":"c","state":"CANCELED","reason":"CANCELED_BY_USER"}]}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/dags/dag-1/cancel"},
			wantOut: []string{"DAG dag-1 cancel requested: 1 nodes canceled, 1 tasks stopping"}},
		{name: "dag cancel when it ended canceled", args: []string{"dag", "cancel", "dag-1"}, route: "POST /v1/dags/dag-1/cancel",
			answer:  `{"id":"dag-1","state":"CANCELED","cancel_requested_at":"2026-01-02T03:04:05Z","nodes":[{"id":"a","state":"CANCELED","task_state":"CANCELED"}]}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/dags/dag-1/cancel"},
			wantOut: []string{"DAG dag-1 CANCELED: 1 nodes canceled"}},
		{name: "dag cancel of a run that ended", args: []string{"dag", "cancel", "dag-1"}, route: "POST /v1/dags/dag-1/cancel",
			answer:  `{"id":"dag-1","state":"SUCCESS","nodes":[{"id":"a","state":"SUCCESS","task_state":"SUCCESS"}]}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/dags/dag-1/cancel"},
			wantOut: []string{"DAG dag-1 already ended SUCCESS: nothing to cancel"}},
		{name: "dag cancel not found", args: []string{"dag", "cancel", "nope"}, route: "POST /v1/dags/nope/cancel", status: 404,
			answer:  `{"error":{"code":"not_found","message":"no such DAG run","field":"id"}}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/dags/nope/cancel"}, wantCode: 1},
		{name: "schedule create", args: []string{"schedule", "create", "-f", "-"}, route: "POST /v1/schedules", status: 201,
			stdin:   `{"name":"nightly","cron":"0 0 2 * * *","task":{"type":"x"}}`,
			wantReq: cliSeen{Method: "POST", Path: "/v1/schedules", Body: `{"name":"nightly","cron":"0 0 2 * * *","task":{"type":"x"}}`},
			wantOut: []string{"schedule nightly created"}},
		{name: "schedule list", args: []string{"schedule", "list"}, route: "GET /v1/schedules",
			answer: `{"schedules":[{"name":"nightly","cron":"0 0 2 * * *","timezone":"Europe/Paris","paused":true},
			  {"name":"hourly","cron":"0 0 * * * *","timezone":"UTC","last_fired_slot":"2026-01-03T01:00:00Z","next_slot":"2026-01-03T02:00:00Z"}]}`,
			wantReq: cliSeen{Method: "GET", Path: "/v1/schedules"},
			wantOut: []string{"NAME", "nightly", "0 0 2 * * *", "Europe/Paris", "true", "2026-01-03T01:00:00.000Z", "2026-01-03T02:00:00.000Z"}},
		// ax schedule get prints a table like the other get commands (it printed JSON).
		{name: "schedule get", args: []string{"schedule", "get", "nightly"}, route: "GET /v1/schedules/nightly",
			answer: `{"name":"nightly","cron":"0 0 2 * * *","timezone":"Europe/Paris","home_region":"eu-west","misfire":"catch_up","catch_up_limit":3,
			  "overlap":"skip","paused":false,"created_at":"2026-01-02T03:04:05Z","last_slot":"2026-01-03T01:00:00Z","last_outcome":"fired",
			  "last_fired_slot":"2026-01-03T01:00:00Z","last_task_id":"t9","next_slot":"2026-01-04T01:00:00Z","task":{"type":"report.generate","priority":1}}`,
			wantReq: cliSeen{Method: "GET", Path: "/v1/schedules/nightly"},
			wantOut: []string{"Name:", "nightly", "Cron:", "0 0 2 * * *", "Time zone:", "Europe/Paris", "Home region:", "eu-west",
				"Misfire:", "catch_up (at most 3)", "Overlap:", "skip", "Last slot:", "2026-01-03T01:00:00.000Z (fired)", "Last task:", "t9",
				"Next slot:", "2026-01-04T01:00:00.000Z", "Task type:", "report.generate", "Task priority:", "1"},
			notOut: []string{"{", "\""}},
		{name: "schedule pause", args: []string{"schedule", "pause", "nightly"}, route: "POST /v1/schedules/nightly/pause", status: 204,
			wantReq: cliSeen{Method: "POST", Path: "/v1/schedules/nightly/pause"},
			wantOut: []string{"schedule nightly paused"}},
		{name: "schedule resume", args: []string{"schedule", "resume", "nightly"}, route: "POST /v1/schedules/nightly/resume", status: 204,
			wantReq: cliSeen{Method: "POST", Path: "/v1/schedules/nightly/resume"},
			wantOut: []string{"schedule nightly resumed"}},
		{name: "schedule delete", args: []string{"schedule", "delete", "nightly"}, route: "DELETE /v1/schedules/nightly", status: 204,
			wantReq: cliSeen{Method: "DELETE", Path: "/v1/schedules/nightly"},
			wantOut: []string{"schedule nightly deleted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.status
			if status == 0 {
				status = 200
			}
			f := newCLIFakeAPI(t).on(tc.route, status, tc.answer)
			r := cliExec(t, nil, f, tc.stdin, tc.args...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d", r.code, r.err, tc.wantCode)
			}
			seen := f.requests()
			if len(seen) != 1 {
				t.Fatalf("requests %+v", seen)
			}
			got, want := seen[0], tc.wantReq
			if got.Method != want.Method || got.Path != want.Path || got.Query != want.Query ||
				(want.Body != "" && got.Body != want.Body) || got.Auth != "Bearer tok" {
				t.Errorf("request %+v, want %+v", got, want)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			for _, w := range tc.notOut {
				if strings.Contains(r.stdout, w) {
					t.Errorf("stdout has %q:\n%s", w, r.stdout)
				}
			}
			// The same command with -o json prints one valid JSON document.
			if tc.wantCode == 0 {
				r := cliExec(t, nil, f, tc.stdin, append([]string{"-o", "json"}, tc.args...)...)
				if r.err != nil || !json.Valid([]byte(r.stdout)) {
					t.Errorf("-o json: %v\n%s", r.err, r.stdout)
				}
			}
		})
	}
}

func TestCLIDAGCancelErrorIsOneLine(t *testing.T) {
	f := newCLIFakeAPI(t).on("POST /v1/dags/d9/cancel", 404, `{"error":{"code":"not_found","message":"no such DAG run","field":"id"}}`)
	r := cliExec(t, nil, f, "", "dag", "cancel", "d9")
	if r.code == 0 || r.err == nil || !strings.Contains(r.err.Error(), "no such DAG run") {
		t.Fatalf("exit %d: %v", r.code, r.err)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	if r := cliExec(t, nil, f, "", "dag", "cancel"); r.code != 2 {
		t.Errorf("no id: exit %d (%v), want a usage error", r.code, r.err)
	}
}

func TestCLIPerIDActionsGoOnAfterAFailure(t *testing.T) {
	f := newCLIFakeAPI(t).
		on("POST /v1/tasks/a/replay", 200, `{"id":"a","state":"PENDING"}`).
		on("POST /v1/tasks/c/replay", 200, `{"id":"c","state":"PENDING"}`)
	r := cliExec(t, nil, f, "", "dlq", "replay", "a", "b", "c")
	if r.code != 1 || r.err.Error() != "1 of 3 failed" {
		t.Fatalf("exit %d: %v", r.code, r.err)
	}
	if len(f.requests()) != 3 || !strings.Contains(r.stdout, "a") || !strings.Contains(r.stdout, "c") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "ax: b: no route") {
		t.Errorf("stderr %q", r.stderr)
	}
	r = cliExec(t, nil, f, "", "-o", "json", "dlq", "replay", "a", "c")
	var list []apiv1.TaskUpdate
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 {
		t.Errorf("-o json with two ids: %v\n%s", err, r.stdout)
	}
}

func TestCLITailFollowsUntilCanceled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var afters []string
	calls := 0
	f := newCLIFakeAPI(t).handle("GET /v1/events", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		mu.Lock()
		calls++
		n := calls
		afters = append(afters, r.URL.Query().Get("after"))
		mu.Unlock()
		switch n {
		case 1:
			cliReply(w, 200, `{"region":"eu-west","events":[{"id":"1767323045000-0","op":"submit","n":1,"tasks":["t1"]}],"next":"c1"}`)
		case 2:
			cliReply(w, 503, `{"error":{"code":"unavailable","message":"leader changing"}}`)
		case 3:
			cliReply(w, 200, `{"region":"eu-west","events":[{"id":"1767323046000-0","op":"claim","n":5,"tasks":["t1","t2","t3","t4","t5"]}],"next":"c2"}`)
		default:
			cancel() // Ctrl-C while the long poll waits
			<-r.Context().Done()
		}
	})
	r := cliExec(t, ctx, f, "", "tail", "--region", "eu-west", "--wait", "5s")
	if r.err != nil {
		t.Fatalf("tail ended with %v, want a clean stop", r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	if f := strings.Fields(lines[0]); len(f) != 5 || f[1] != "eu-west" || f[2] != "submit" || f[3] != "1" || f[4] != "t1" {
		t.Errorf("line 1: %q", lines[0])
	}
	if !strings.HasSuffix(strings.Join(strings.Fields(lines[1]), " "), "eu-west claim 5 t1 t2 t3 (+2)") {
		t.Errorf("line 2: %q", lines[1])
	}
	if !strings.Contains(r.stderr, "leader changing; retrying") || !strings.Contains(r.stderr, "reconnected") {
		t.Errorf("stderr %q", r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(afters) != "[ c1 c1 c2]" {
		t.Errorf("cursors sent %q, want each Next passed back", afters)
	}
	q := f.requests()[0].Query
	if !strings.Contains(q, "region=eu-west") || !strings.Contains(q, "wait=5s") {
		t.Errorf("query %q", q)
	}
}

func TestCLITailStopsOnAClientError(t *testing.T) {
	f := newCLIFakeAPI(t).on("GET /v1/events", 404, `{"error":{"code":"not_found","message":"no region mars"}}`)
	r := cliExec(t, nil, f, "", "tail", "--region", "mars")
	if r.code != 1 || r.err.Error() != "no region mars" {
		t.Errorf("exit %d: %v", r.code, r.err)
	}
}

// Flags come from AX_* env too, except where a value from the environment
// would change what a destructive or file-driven command does.
func TestCLIEnvironment(t *testing.T) {
	t.Setenv("AX_TENANT", "acme")
	t.Setenv("AX_PRIORITY", "1")
	t.Setenv("AX_TYPE", "from.env")

	f := newCLIFakeAPI(t).on("POST /v1/tasks", 201, `{"id":"t1","state":"READY","region":"r","pool":"p"}`)
	if r := cliExec(t, nil, f, "", "submit"); r.err != nil {
		t.Fatal(r.err)
	}
	if body := f.requests()[0].Body; body != `{"type":"from.env","priority":1,"tenant":"acme"}` {
		t.Errorf("submit from env sent %s", body)
	}

	f = batchAPI(t)
	if r := cliExec(t, nil, f, specsFile(2, nil, nil), "submit", "-f", "-"); r.err != nil {
		t.Errorf("submit -f with spec flags in the environment: %v", r.err)
	}

	f = newCLIFakeAPI(t).on("POST /v1/tasks/t1/cancel", 200, `{"id":"t1","state":"CANCELED"}`)
	if r := cliExec(t, nil, f, "", "cancel", "t1"); r.err != nil {
		t.Errorf("cancel ID with AX_TENANT set: %v", r.err)
	}
	f = newCLIFakeAPI(t)
	if r := cliExec(t, nil, f, "", "cancel"); r.code != 2 || len(f.requests()) != 0 {
		t.Errorf("cancel without ids nor typed filters: exit %d (%v), %d requests", r.code, r.err, len(f.requests()))
	}
	f = newCLIFakeAPI(t).on("POST /v1/tasks/cancel", 200, `{"canceled":1}`)
	if r := cliExec(t, nil, f, "", "cancel", "--state", "PENDING"); r.err != nil {
		t.Fatal(r.err)
	}
	if body := f.requests()[0].Body; body != `{"state":"PENDING"}` {
		t.Errorf("bulk cancel sent %s, want only the typed filter", body)
	}
}

// Dead letters and bulk cancels gathered from every region: the REGION
// column, the cursor, and the regions that did not answer (named on
// stderr, exit 1 after the results; -o json prints the answer as it is).
func TestCLIDLQListAcrossRegions(t *testing.T) {
	page := `{"tasks":[
	  {"id":"t2","type":"a","state":"FAILED","tenant":"acme","held_by":"us-east","attempts":1,"last_error":"boom"},
	  {"id":"t1","type":"a","state":"FAILED","tenant":"acme","held_by":"eu-west","attempts":1,"last_error":"bang"}],
	  "next_cursor":"MTox","regions":[{"region":"eu-west","count":1},{"region":"us-east","count":1}],"unavailable":[]}`
	f := newCLIFakeAPI(t).on("GET /v1/dlq", 200, page)
	r := cliExec(t, nil, f, "", "dlq", "list", "--limit", "2", "--region", "eu-west", "--cursor", "MTow")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if q := f.requests()[0].Query; q != "cursor=MTow&limit=2&region=eu-west" {
		t.Errorf("query %q", q)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "REGION") || !strings.Contains(lines[1], "us-east") || !strings.Contains(lines[2], "eu-west") {
		t.Errorf("table:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "more with --cursor MTox") {
		t.Errorf("stderr %q lacks the next cursor", r.stderr)
	}

	partial := `{"tasks":[{"id":"t1","type":"a","state":"FAILED","held_by":"eu-west"}],
	  "regions":[{"region":"eu-west","count":1},{"region":"us-east","count":0,"error":{"code":"unavailable","message":"connection refused"}}],
	  "unavailable":["us-east"]}`
	f = newCLIFakeAPI(t).on("GET /v1/dlq", 200, partial)
	r = cliExec(t, nil, f, "", "dlq", "list")
	if r.code != 1 || !strings.Contains(r.err.Error(), "us-east") {
		t.Fatalf("exit %d (%v), want 1 naming us-east", r.code, r.err)
	}
	if !strings.Contains(r.stdout, "t1") || !strings.Contains(r.stderr, "region us-east did not answer: connection refused") {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = cliExec(t, nil, f, "", "-o", "json", "dlq", "list")
	var got struct{ Unavailable []string }
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 1 || len(got.Unavailable) != 1 {
		t.Errorf("-o json: exit %d, %v:\n%s", r.code, err, r.stdout)
	}

	// AX_REGION, exported for another command, does not narrow the listing.
	t.Setenv("AX_REGION", "eu-west")
	f = newCLIFakeAPI(t).on("GET /v1/dlq", 200, `{"tasks":[],"unavailable":[]}`)
	if r := cliExec(t, nil, f, "", "dlq", "list"); r.err != nil || f.requests()[0].Query != "limit=50" {
		t.Errorf("dlq list with AX_REGION: %v, query %q", r.err, f.requests()[0].Query)
	}
}

func TestCLIBulkCancelPerRegion(t *testing.T) {
	answer := `{"canceled":5,"regions":[{"region":"eu-west","count":2},{"region":"ap-south","count":0,"error":{"code":"unavailable","message":"timed out"}},
	  {"region":"us-east","count":3}],"unavailable":["ap-south"]}`
	f := newCLIFakeAPI(t).on("POST /v1/tasks/cancel", 200, answer)
	r := cliExec(t, nil, f, "", "cancel", "--type", "x")
	if r.code != 1 || !strings.Contains(r.err.Error(), "ap-south") {
		t.Fatalf("exit %d (%v), want 1 naming ap-south", r.code, r.err)
	}
	for _, w := range []string{"REGION", "eu-west", "2", "ap-south", "unavailable", "us-east", "3", "canceled 5 tasks"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "region ap-south did not answer: timed out") {
		t.Errorf("stderr %q", r.stderr)
	}

	f = newCLIFakeAPI(t).on("POST /v1/tasks/cancel", 200, `{"canceled":1,"regions":[{"region":"eu-west","count":1}],"unavailable":[]}`)
	if r := cliExec(t, nil, f, "", "cancel", "--type", "x", "--region", "eu-west"); r.err != nil {
		t.Fatal(r.err)
	}
	if body := f.requests()[0].Body; body != `{"type":"x","region":"eu-west"}` {
		t.Errorf("body %s", body)
	}
	f = newCLIFakeAPI(t)
	if r := cliExec(t, nil, f, "", "cancel", "--region", "eu-west"); r.code != 2 || len(f.requests()) != 0 {
		t.Errorf("--region alone: exit %d (%v), %d requests", r.code, r.err, len(f.requests()))
	}
	// AX_REGION does not narrow (nor, alone, start) a bulk cancel.
	t.Setenv("AX_REGION", "eu-west")
	f = newCLIFakeAPI(t).on("POST /v1/tasks/cancel", 200, `{"canceled":0,"unavailable":[]}`)
	if r := cliExec(t, nil, f, "", "cancel", "--type", "x"); r.err != nil || f.requests()[0].Body != `{"type":"x"}` {
		t.Errorf("bulk cancel with AX_REGION: %v, body %s", r.err, f.requests()[0].Body)
	}
}

// --tenant addresses one tenant's schedules (each tenant has its own
// names) and narrows ax cost and ax dlq list; a tenant's token naming
// another is the server's 403, one line and exit 3 (exitAuth), never a quiet report
// of its own. An AX_TENANT exported for submits sends none of them.
func TestCLITenantScopes(t *testing.T) {
	for _, c := range []struct {
		args        []string
		route       string
		path, query string
	}{
		{[]string{"schedule", "list", "--tenant", "acme"}, "GET /v1/schedules", "/v1/schedules", "tenant=acme"},
		{[]string{"schedule", "get", "nightly", "--tenant", "acme"}, "GET /v1/schedules/nightly", "/v1/schedules/nightly", "tenant=acme"},
		{[]string{"schedule", "pause", "nightly", "--tenant", "acme"}, "POST /v1/schedules/nightly/pause", "/v1/schedules/nightly/pause", "tenant=acme"},
		{[]string{"schedule", "resume", "nightly", "--tenant", "acme"}, "POST /v1/schedules/nightly/resume", "/v1/schedules/nightly/resume", "tenant=acme"},
		{[]string{"schedule", "delete", "nightly", "--tenant", "acme"}, "DELETE /v1/schedules/nightly", "/v1/schedules/nightly", "tenant=acme"},
	} {
		f := newCLIFakeAPI(t).on(c.route, 200, `{"name":"nightly","schedules":[]}`)
		if r := cliExec(t, nil, f, "", c.args...); r.err != nil {
			t.Fatalf("%v: %v", c.args, r.err)
		}
		if got := f.requests()[0]; got.Path != c.path || got.Query != c.query {
			t.Errorf("%v: %+v, want %s?%s", c.args, got, c.path, c.query)
		}
	}
	f := newCLIFakeAPI(t).on("GET /v1/schedules", 200, `{"schedules":[{"name":"nightly","cron":"@daily","task":{"type":"x","tenant":"acme"}},
	  {"name":"nightly","cron":"@hourly","task":{"type":"x","tenant":"globex"}}]}`)
	r := cliExec(t, nil, f, "", "schedule", "list")
	if r.err != nil || !strings.Contains(r.stdout, "TENANT") || !strings.Contains(r.stdout, "acme") || !strings.Contains(r.stdout, "globex") {
		t.Errorf("schedule list: %v\n%s", r.err, r.stdout)
	}
	forbidden := `{"error":{"code":"permission_denied","message":"this token may only read the cost of tenant acme","field":"tenant"}}`
	f = newCLIFakeAPI(t).on("GET /v1/cost", 403, forbidden)
	r = cliExec(t, nil, f, "", "cost", "--tenant", "globex")
	if r.code != exitAuth || r.stdout != "" || r.err == nil || !strings.Contains(r.err.Error(), "tenant acme") || strings.Contains(r.err.Error(), "\n") {
		t.Errorf("cost --tenant another: exit %d %v, stdout %q", r.code, r.err, r.stdout)
	}
	if q := f.requests()[0].Query; !strings.Contains(q, "tenant=globex") {
		t.Errorf("cost --tenant globex sent %q", q)
	}
	t.Setenv("AX_TENANT", "globex")
	for _, c := range []struct {
		args  []string
		route string
	}{
		{[]string{"cost"}, "GET /v1/cost"}, {[]string{"dlq", "list"}, "GET /v1/dlq"},
		{[]string{"schedule", "list"}, "GET /v1/schedules"}, {[]string{"schedule", "get", "nightly"}, "GET /v1/schedules/nightly"},
		{[]string{"schedule", "pause", "nightly"}, "POST /v1/schedules/nightly/pause"},
	} {
		f := newCLIFakeAPI(t).on(c.route, 200, `{"name":"nightly","schedules":[],"tasks":[],"rows":[],"unavailable":[]}`)
		if r := cliExec(t, nil, f, "", c.args...); r.err != nil || strings.Contains(f.requests()[0].Query, "tenant=") {
			t.Errorf("%v with AX_TENANT: %v, query %q", c.args, r.err, f.requests()[0].Query)
		}
	}
}

// Every command answers the same mistake with the same exit status and one
// line: a misspelt flag names the closest flag, an unknown command the
// closest command, and the API's 401 says how to give a token.
func TestCLIMistakesShareExitCodesAndHints(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"submit", "--typ", "noop"}, exitUsage, "unknown flag: --typ (did you mean --type?)"},
		{[]string{"tasks", "ls", "--stat", "RUNNING"}, exitUsage, "(did you mean --state?)"},
		{[]string{"get", "t1", "--outptu", "json"}, exitUsage, "(did you mean --output?)"},
		{[]string{"server", "--confg", "x.yaml"}, exitUsage, "unknown flag: --confg (did you mean --config?)"},
		{[]string{"worker", "--pol", "cpu"}, exitUsage, "(did you mean --pool?)"},
		{[]string{"dev", "--prot", "0"}, exitUsage, "(did you mean --port?)"},
		{[]string{"dev", "extra"}, exitUsage, `unknown command "extra" for "ax dev"`},
		{[]string{"version", "--nope"}, exitUsage, "unknown flag: --nope"},
		{[]string{"sumbit"}, exitUsage, `(did you mean "submit"?)`},
		{[]string{"regions"}, exitAuth, "missing or unknown bearer token (field Authorization) (give the API's token with --token or AX_TOKEN)"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			f := newCLIFakeAPI(t).on("GET /v1/regions", 401,
				`{"error":{"code":"unauthenticated","message":"missing or unknown bearer token","field":"Authorization"}}`)
			r := cliExec(t, nil, f, "", c.args...)
			if r.code != c.code || r.err == nil || !strings.Contains(r.err.Error(), c.want) {
				t.Errorf("exit %d, %v; want exit %d and %q", r.code, r.err, c.code, c.want)
			}
		})
	}
}

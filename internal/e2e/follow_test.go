package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// Every per-task operation reaches a task wherever it is: two
// regions, auth on, tasks handed from us-east-1 to eu-west-1, each
// operation sent to the home server and to the holder's.
func TestEveryTaskOperationFollowsAHandedOffTask(t *testing.T) {
	col := startOTLP(t)
	// Only the standard endpoint variable names the collector and turns
	// tracing on (every process inherits the test's environment; the
	// protocol is http/protobuf by default); tracing.redis adds Redis spans.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	fed := newFederation(t, fedOpts{extra: "tracing: {redis: true}"})

	t.Run("one trace links submit, hand-off, receipt and run across regions", func(t *testing.T) {
		traceID, parent := randomHex(16), randomHex(8)
		req, _ := http.NewRequest(http.MethodPost, fed.server("us-east-1").api+"/v1/tasks", strings.NewReader(
			`{"type":"sleep","payload":{"ms":5},"regions":["eu-west-1"],"tags":{"class":"cpu"}}`))
		req.Header.Set("Authorization", "Bearer "+fed.token(tokSubmitterA))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var sr struct{ ID, Region string }
		_ = json.NewDecoder(resp.Body).Decode(&sr)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || sr.Region != "eu-west-1" {
			t.Fatalf("submit: %d %+v", resp.StatusCode, sr)
		}
		if tk := fed.waitState("us-east-1", tokSubmitterA, sr.ID, task.Success, 20*time.Second); tk.TraceID != traceID {
			t.Fatalf("the task's trace_id is %q, want the request's %s", tk.TraceID, traceID)
		}
		byName := map[string]otlpSpan{}
		waitUntil(t, 15*time.Second, "the task's four spans at the collector", func() bool {
			for _, s := range col.trace(traceID) {
				if s.Attrs["ax.task.id"] == sr.ID && (s.Name != "ax.handoff" || s.Attrs["ax.handoff.outcome"] == "accepted") {
					byName[s.Name] = s
				}
			}
			return len(byName) == 4
		})
		var httpSpan, redisCmd otlpSpan
		waitUntil(t, 15*time.Second, "the request's HTTP server span and a Redis span under it", func() bool {
			for _, s := range col.trace(traceID) {
				switch {
				case s.Name == "POST /v1/tasks":
					httpSpan = s
				case s.Attrs["db.system.name"] == "redis" && httpSpan.SpanID != "" && s.ParentID == httpSpan.SpanID:
					redisCmd = s
				}
			}
			return httpSpan.SpanID != "" && redisCmd.SpanID != ""
		})
		if httpSpan.Service != "ax-server" || httpSpan.Region != "us-east-1" || httpSpan.ParentID != parent || httpSpan.Attrs["http.route"] != "/v1/tasks" {
			t.Fatalf("HTTP server span %+v: want us-east-1's server, child of the request's traceparent %s", httpSpan, parent)
		}
		// One chain: the request → submit → the hand-off (a client span)
		// → eu-west-1's HTTP server span of the hand-off request → the
		// receipt → the run on eu-west-1's worker.
		sub := byName["ax.submit"]
		if sub.Service != "ax-server" || sub.Region != "us-east-1" || sub.ParentID != httpSpan.SpanID || sub.Attrs["ax.placement.region"] != "eu-west-1" {
			t.Fatalf("submit span %+v: want us-east-1's server, child of the HTTP server span %s, placed in eu-west-1", sub, httpSpan.SpanID)
		}
		var peerSpan otlpSpan
		waitUntil(t, 15*time.Second, "eu-west-1's HTTP server span of the hand-off request", func() bool {
			for _, s := range col.trace(traceID) {
				if s.Name == "POST /v1/internal/handoff" && s.ParentID == byName["ax.handoff"].SpanID {
					peerSpan = s
				}
			}
			return peerSpan.SpanID != ""
		})
		chain := []struct {
			name            string
			service, region string
			parent          string
		}{
			{"ax.handoff", "ax-server", "us-east-1", sub.SpanID},
			{"POST /v1/internal/handoff", "ax-server", "eu-west-1", byName["ax.handoff"].SpanID},
			{"ax.handoff.receive", "ax-server", "eu-west-1", peerSpan.SpanID},
			{"ax.run sleep", "ax-worker", "eu-west-1", byName["ax.handoff.receive"].SpanID},
		}
		byName["POST /v1/internal/handoff"] = peerSpan
		for _, want := range chain {
			s := byName[want.name]
			if s.Service != want.service || s.Region != want.region || s.ParentID != want.parent {
				t.Fatalf("span %s: %+v; want from %s in %s, a child of %s (the chain HTTP %s → submit %s → hand-off %s → peer HTTP %s → receive %s)",
					want.name, s, want.service, want.region, want.parent, httpSpan.SpanID, sub.SpanID, byName["ax.handoff"].SpanID, peerSpan.SpanID, byName["ax.handoff.receive"].SpanID)
			}
		}
		if peerSpan.Attrs["http.route"] != "/v1/internal/handoff" {
			t.Fatalf("the hand-off request's server span: %+v", peerSpan)
		}
		if run := byName["ax.run sleep"]; run.StartNanos < sub.EndNanos || run.EndNanos < run.StartNanos {
			t.Fatalf("the run (%d–%d) does not follow the submit (ended %d)", run.StartNanos, run.EndNanos, sub.EndNanos)
		}
	})

	t.Run("trail and times read as one history from any server", func(t *testing.T) {
		h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
			"type": "sleep", "payload": map[string]int{"ms": 10}})
		fed.waitState(h.Home, tokSubmitterA, h.ID, task.Success, 20*time.Second)
		home := fed.region(h.Home).task(t, h.ID)
		var trails [][]task.Transition
		for _, via := range []string{h.Home, h.Region} {
			tk, code := fed.getTask(via, tokSubmitterA, h.ID)
			if code != http.StatusOK || !tk.CreatedAt.Equal(home.CreatedAt) {
				t.Fatalf("via %s: %d created_at %v, want the home's %v (a hand-off keeps it)", via, code, tk.CreatedAt, home.CreatedAt)
			}
			if tk.Attempts != 1 {
				t.Fatalf("via %s: attempts %d, want 1", via, tk.Attempts)
			}
			tr := fed.trail(via, tokSubmitterA, h.ID)
			want := []struct{ reason, region string }{
				{task.ReasonSubmitted, "us-east-1"},
				{task.ReasonHandedOff, "us-east-1"},
				{task.ReasonReceived, "eu-west-1"},
				{task.ReasonCommitted, "eu-west-1"},
				{task.ReasonClaimed, "eu-west-1"},
				{task.ReasonCompleted, "eu-west-1"},
			}
			if len(tr) != len(want) {
				t.Fatalf("via %s: trail %+v, want %d steps", via, tr, len(want))
			}
			for i, w := range want {
				if tr[i].Reason != w.reason || tr[i].Region != w.region {
					t.Fatalf("via %s: step %d is %+v, want %s in %s", via, i, tr[i], w.reason, w.region)
				}
			}
			trails = append(trails, tr)
		}
		a, _ := json.Marshal(trails[0])
		b, _ := json.Marshal(trails[1])
		if string(a) != string(b) {
			t.Fatalf("the two servers tell different histories:\n%s\n%s", a, b)
		}
	})

	t.Run("replay", func(t *testing.T) {
		h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
			"type": "sleep", "payload": map[string]int{"ms": -1}, "max_retries": 0}) // a bad payload: FAILED NON_RETRYABLE
		fed.waitState(h.Home, tokSubmitterA, h.ID, task.Failed, 20*time.Second)
		for i, via := range []string{h.Home, h.Region} {
			code, body := fed.call(via, tokOperator, http.MethodPost, "/v1/tasks/"+h.ID+"/replay", nil)
			if code != http.StatusOK {
				t.Fatalf("replay via %s: %d %s", via, code, body)
			}
			// A replay gives a fresh retry budget: one attempt of this run.
			waitUntil(t, 20*time.Second, "replayed task FAILED again", func() bool {
				tk, _ := fed.getTask(via, tokSubmitterA, h.ID)
				return tk.State == task.Failed && tk.Attempts == 1 && countReason(fed.trail(via, tokSubmitterA, h.ID), task.ReasonReplayed) == i+1
			})
		}
		tr := fed.trail(h.Home, tokSubmitterA, h.ID)
		if n := countReason(tr, task.ReasonClaimed); n != 3 {
			t.Fatalf("%d CLAIMED steps, want 3 (the first run and two replays): %+v", n, tr)
		}
		// Another tenant's operator cannot replay it, through either server.
		for _, via := range []string{h.Home, h.Region} {
			if code, body := fed.call(via, tokSubmitterB, http.MethodPost, "/v1/tasks/"+h.ID+"/replay", nil); code != http.StatusNotFound && code != http.StatusForbidden {
				t.Fatalf("replay by the other tenant via %s: %d %s", via, code, body)
			}
		}
	})

	t.Run("priority", func(t *testing.T) {
		h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
			"type": "sleep", "payload": map[string]int{"ms": 20000}})
		fed.waitState(h.Home, tokSubmitterA, h.ID, task.Running, 20*time.Second)
		for i, via := range []string{h.Home, h.Region} {
			code, body := fed.call(via, tokOperator, http.MethodPost, "/v1/tasks/"+h.ID+"/priority", map[string]int{"priority": i})
			if code != http.StatusOK {
				t.Fatalf("priority via %s: %d %s", via, code, body)
			}
			if tk, _ := fed.getTask(h.Home, tokSubmitterA, h.ID); tk.Priority != i {
				t.Fatalf("after priority %d via %s: %d", i, via, tk.Priority)
			}
		}
		if code, body := fed.call(h.Home, tokOperator, http.MethodPost, "/v1/tasks/"+h.ID+"/cancel", nil); code != http.StatusOK {
			t.Fatalf("cancel: %d %s", code, body)
		}
	})

	t.Run("the CLI follows every region, completes ids and replays dead letters by filter", func(t *testing.T) {
		api, tok := fed.server("us-east-1").api, fed.token(tokOperator)
		var out lockedBuffer
		tail := exec.Command(axBin, "--api", api, "--settings", "", "--token", tok, "tail", "-o", "json", "--wait", "2s")
		tail.Stdout = &out
		if err := tail.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tail.Process.Kill(); _ = tail.Wait() }()
		time.Sleep(time.Second) // the tail's first polls are under way
		since := time.Now().UTC().Format(time.RFC3339Nano)
		var failed []string
		for range 2 {
			h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
				"type": "sleep", "payload": map[string]int{"ms": -1}, "max_retries": 0})
			fed.waitState(h.Home, tokSubmitterA, h.ID, task.Failed, 20*time.Second)
			failed = append(failed, h.ID)
		}
		// The tail saw both regions' events of the handed-off tasks: the
		// submit in us-east-1 and the claim in eu-west-1.
		waitUntil(t, 20*time.Second, "ax tail's events from both regions", func() bool {
			seen := map[string]bool{}
			for _, l := range strings.Split(out.String(), "\n") {
				var e struct {
					Region, Op string
					Tasks      []string
				}
				if json.Unmarshal([]byte(l), &e) == nil && slices.Contains(e.Tasks, failed[0]) {
					seen[e.Region+" "+e.Op] = true
				}
			}
			return seen["us-east-1 submit"] && seen["eu-west-1 claim"]
		})
		stdout, stderr, code := runAx(t, api, "--token", tok, "__complete", "dlq", "replay", "")
		for _, id := range failed {
			if code != 0 || !strings.Contains(stdout, id) {
				t.Fatalf("completion of ax dlq replay (exit %d, %s) lacks %s:\n%s", code, stderr, id, stdout)
			}
		}
		stdout, stderr, code = runAx(t, api, "--token", tok, "-o", "json", "dlq", "replay", "--tenant", "team-a", "--since", since, "--dry-run")
		var ids []string
		if code != 0 || json.Unmarshal([]byte(stdout), &ids) != nil || len(ids) != 2 || !slices.Contains(ids, failed[0]) || !slices.Contains(ids, failed[1]) {
			t.Fatalf("dry run (exit %d, %s): %s, want exactly %v", code, stderr, stdout, failed)
		}
		// Another tenant's filter chooses none of them.
		if stdout, _, code = runAx(t, api, "--token", tok, "-o", "json", "dlq", "replay", "--tenant", "team-b", "--since", since, "--dry-run"); code != 0 || strings.TrimSpace(stdout) != "null" && strings.TrimSpace(stdout) != "[]" {
			t.Fatalf("team-b's dry run (exit %d): %s", code, stdout)
		}
		if _, stderr, code = runAx(t, api, "--token", tok, "dlq", "replay", "--tenant", "team-a", "--since", since); code != 0 || !strings.Contains(stderr, "replayed 2 of 2") {
			t.Fatalf("replay by filter: exit %d, %s", code, stderr)
		}
		for _, id := range failed {
			waitUntil(t, 20*time.Second, "the replayed task FAILED again", func() bool {
				return countReason(fed.trail("us-east-1", tokSubmitterA, id), task.ReasonReplayed) == 1
			})
		}
	})

	t.Run("unknown regions are 404 or 400, never 503", func(t *testing.T) {
		mars := "0123456789abcdef.0.mars-1"
		for _, c := range []struct {
			method, path string
			want         int
			field        string
		}{
			{http.MethodGet, "/v1/tasks/" + mars, http.StatusNotFound, ""},
			{http.MethodGet, "/v1/tasks/" + mars + "/trail", http.StatusNotFound, ""},
			{http.MethodPost, "/v1/tasks/" + mars + "/cancel", http.StatusNotFound, ""},
			{http.MethodPost, "/v1/tasks/" + mars + "/replay", http.StatusNotFound, ""},
			{http.MethodGet, "/v1/events?region=mars-1", http.StatusBadRequest, "region"},
			{http.MethodPost, "/v1/regions/mars-1/drain", http.StatusBadRequest, "region"},
			{http.MethodGet, "/v1/dlq?region=mars-1", http.StatusBadRequest, "region"},
		} {
			body := any(nil)
			if c.method == http.MethodPost && strings.HasSuffix(c.path, "/drain") {
				body = map[string]any{}
			}
			code, resp := fed.call("us-east-1", tokOperator, c.method, c.path, body)
			if code != c.want {
				t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, resp, c.want)
				continue
			}
			var e struct {
				Error struct{ Code, Message, Field string } `json:"error"`
			}
			if err := json.Unmarshal(resp, &e); err != nil || e.Error.Message == "" || e.Error.Field != c.field {
				t.Errorf("%s %s: error body %s, want a message and field %q", c.method, c.path, resp, c.field)
			}
		}
		_, stderr, code := runAx(t, fed.server("us-east-1").api, "--token", fed.token(tokOperator), "tail", "--region", "nope")
		if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "region") {
			t.Fatalf("ax tail --region nope: exit %d, stderr %q; want one line naming the region and a non-zero exit", code, stderr)
		}
	})
}

func countReason(tr []task.Transition, reason string) int {
	n := 0
	for _, s := range tr {
		if s.Reason == reason {
			n++
		}
	}
	return n
}

// trail reads a task's trail through a region's API.
func (f *federation) trail(region, token, id string) []task.Transition {
	f.t.Helper()
	code, body := f.call(region, token, http.MethodGet, "/v1/tasks/"+id+"/trail", nil)
	if code != http.StatusOK {
		f.t.Fatalf("trail of %s via %s: %d %s", id, region, code, body)
	}
	var r struct {
		Transitions []task.Transition `json:"transitions"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		f.t.Fatal(err)
	}
	return r.Transitions
}

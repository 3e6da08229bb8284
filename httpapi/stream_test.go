package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// sse is one open GET /v1/stream: its events as they arrive.
type sse struct {
	status int
	events chan sseEvent
	close  func()
}

type sseEvent struct{ name, data string }

func openStream(t *testing.T, f *fed, region, query string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.R(region).URL()+"/v1/stream?"+query, nil)
	resp, err := f.HTTP.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &sse{status: resp.StatusCode, events: make(chan sseEvent, 64)}
	done := make(chan struct{})
	s.close = func() { cancel(); resp.Body.Close(); <-done }
	t.Cleanup(s.close)
	go func() {
		defer close(done)
		defer close(s.events)
		if resp.StatusCode != 200 {
			return
		}
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	}()
	return s
}

// next waits for the next event named name (others are skipped).
func (s *sse) next(t *testing.T, name string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream ended waiting for %s", name)
			}
			if ev.name == name {
				return ev.data
			}
		case <-deadline:
			t.Fatalf("no %s event in %v", name, within)
		}
	}
}

func ticket(t *testing.T, f *fed, region, tok string) string {
	t.Helper()
	var tk apiv1.StreamTicket
	f.Call(http.MethodPost, f.R(region).URL()+"/v1/stream/tickets", tok, nil).Want(t, http.StatusCreated).JSON(t, &tk)
	if tk.Ticket == "" || time.Until(tk.ExpiresAt) > time.Minute || strings.Contains(tk.Ticket, tok) {
		t.Fatalf("ticket %+v", tk)
	}
	return "ticket=" + url.QueryEscape(tk.Ticket)
}

// streamContract: GET /v1/stream with a ticket (the dashboard's way) or a
// bearer token; tickets are one-use, signed, and no cluster token gets one;
// a tenant sees events without task ids and only its own tasks; the
// per-tenant long-poll cap bounds streams and a hang-up frees its place.
func streamContract(t *testing.T, f *fed) {
	local := spec{"type": "stream.probe", "tags": x86, "regions": []string{aws}}
	q := ticket(t, f, aws, tokAcme)
	s := openStream(t, f, aws, q)
	if s.status != 200 {
		t.Fatalf("stream with a ticket: %d", s.status)
	}
	var rr apiv1.RegionsResponse
	if err := json.Unmarshal([]byte(s.next(t, "regions", 5*time.Second)), &rr); err != nil || len(rr.Regions) != 3 {
		t.Fatalf("regions event: %v %+v", err, rr)
	}
	sr := f.SubmitOK(aws, tokAcme, local)
	var ev apiv1.EventsResponse
	for {
		if err := json.Unmarshal([]byte(s.next(t, "events", 10*time.Second)), &ev); err != nil {
			t.Fatal(err)
		}
		if len(ev.Events) > 0 && ev.Events[0].Op == "submit" {
			break
		}
	}
	if ev.Region != aws || ev.Events[0].Tasks != nil {
		t.Fatalf("a tenant's stream shows task ids: %+v", ev)
	}
	// A spent, forged or missing ticket, and the cluster token's ticket.
	for _, bad := range []string{q, q[:len(q)-3] + "AAA", "", "ticket=x.y"} {
		rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/stream?"+bad, "", nil).Want(t, http.StatusUnauthorized)
		if rep.Err(t).Code != apiv1.CodeUnauthorized {
			t.Fatalf("%q: %s", bad, rep.Body)
		}
	}
	f.Call(http.MethodPost, f.R(aws).URL()+"/v1/stream/tickets", tokCluster, nil).Want(t, http.StatusForbidden)
	f.Call(http.MethodGet, f.R(aws).URL()+"/v1/stream?tenant=x", tokAcme, nil).Want(t, http.StatusBadRequest)

	// A task's stream: its own tenant only (404, like GET); a bearer token
	// works as well as a ticket. The per-tenant cap (2) counts streams.
	other := f.SubmitOK(aws, tokGlobex, local)
	f.Call(http.MethodGet, f.R(aws).URL()+"/v1/stream?task="+other.ID+"&"+ticket(t, f, aws, tokAcme), "", nil).Want(t, http.StatusNotFound)
	ts := openStream(t, f, aws, "task="+sr.ID+"&"+ticket(t, f, aws, tokAcme))
	var tk task.Task
	if err := json.Unmarshal([]byte(ts.next(t, "task", 5*time.Second)), &tk); err != nil || tk.ID != sr.ID || tk.Tenant != "acme" {
		t.Fatalf("task event: %v %+v", err, tk)
	}
	rep := f.Call(http.MethodGet, f.R(aws).URL()+"/v1/stream?"+ticket(t, f, aws, tokAcme), "", nil).Want(t, http.StatusTooManyRequests)
	if rep.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", rep.Header)
	}
	// Another tenant is not slowed by acme's streams.
	g := openStream(t, f, aws, ticket(t, f, aws, tokGlobex))
	if g.status != 200 {
		t.Fatalf("globex's stream: %d", g.status)
	}
	g.close()
	// A cancel of the task shows on its stream; hanging up frees the place.
	f.Call(http.MethodPost, f.R(aws).URL()+"/v1/tasks/"+sr.ID+"/cancel", tokOperator, nil).Want(t, http.StatusOK)
	for tk.State != task.Canceled {
		if err := json.Unmarshal([]byte(ts.next(t, "task", 5*time.Second)), &tk); err != nil {
			t.Fatal(err)
		}
	}
	ts.close()
	fedtest.Eventually(t, 2*time.Second, "a hang-up frees the stream's place", func() bool {
		s := openStream(t, f, aws, ticket(t, f, aws, tokAcme))
		defer s.close()
		return s.status == http.StatusOK
	})
}

// onBehalfOf: a task action records on_behalf_of only from the cluster
// token (a forwarding server names its caller); from any other token the
// token's own name is recorded.
func onBehalfOf(t *testing.T, f *fed) {
	for _, c := range []struct{ tok, want string }{{tokGlobexOps, "globex-ops"}, {tokCluster, "oncall"}} {
		sr := f.SubmitOK(aws, tokGlobex, spec{"type": "behalf.probe", "tags": x86, "regions": []string{aws}, "delay": "2m"})
		f.Call(http.MethodPost, f.R(aws).URL()+"/v1/tasks/"+sr.ID+"/cancel?on_behalf_of=oncall", c.tok, nil).Want(t, http.StatusOK)
		var by string
		for _, s := range f.Trail(aws, tokGlobex, sr.ID) {
			if s.To == task.Canceled {
				by = s.By
			}
		}
		if by != c.want {
			t.Fatalf("cancel with %s and on_behalf_of=oncall recorded by %q, want %q", c.tok, by, c.want)
		}
	}
}

// pythonClient runs clients/python's contract tests against this server: submit,
// get, list through the cursor, cancel, errors as APIError, DLQ replay.
// python3 must be installed (make deps); the test fails without it.
func pythonClient(t *testing.T, f *fed) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed: clients/python's tests need it (apt-get install python3)")
	}
	ctx := fedtest.Ctx(t)
	sr := f.SubmitOK(aws, tokAcme, spec{"type": "py.poison", "tags": x86, "regions": []string{aws}, "priority": 1, "max_retries": 0})
	held, err := f.R(aws).Store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: poolSpot, Worker: "w-py", N: 1})
	if err != nil || len(held) != 1 || held[0].ID != sr.ID {
		t.Fatalf("claim: %+v %v", held, err)
	}
	if st, _, err := f.R(aws).Store.Claimer().Fail(ctx, queue.Failure{ID: sr.ID, Token: held[0].LeaseToken, Error: "boom"}); err != nil || st != task.Failed {
		t.Fatalf("fail: %s %v", st, err)
	}
	tags, _ := json.Marshal(x86)
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", "test_contract")
	cmd.Dir = filepath.Join("..", "clients", "python", "tests")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "src"), "AX_URL="+f.R(aws).URL(),
		"AX_SUBMITTER="+tokAcme, "AX_OTHER="+tokGlobex, "AX_OPERATOR="+tokOperator, "AX_DEAD="+sr.ID,
		"AX_TAGS="+string(tags), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest test_contract: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Ran 3 tests") || strings.Contains(string(out), "skipped") {
		t.Fatalf("the Python tests did not run: %s", out)
	}
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
)

// rawCall is fed.call with extra request headers.
func (f *federation) rawCall(region, token, method, path string, body []byte, hdr map[string]string) (int, []byte) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.server(region).api+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token(token))
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// metricWhere sums the samples of name whose label set contains every one
// of labels (`route="GET /v1/dlq"`), from api's /metrics (with token, when
// metrics details are behind one).
func metricWhere(t *testing.T, api, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	total := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for _, want := range labels {
			ok = ok && strings.Contains(l, want)
		}
		if ok {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total
}

// X-Ax-Forwarded counts only with the cluster token: from a submitter, -12
// on a DLQ listing does not multiply the requests between the regions, and
// 1 on a keyed submit does not make the receiving server skip routing (which
// would let two regions each keep a task under one idempotency key).
func TestForwardedHeaderIsTrustedOnlyFromTheClusterToken(t *testing.T) {
	fed := newFederation(t, fedOpts{})
	dlqCount := func(region string) float64 {
		return metricWhere(t, fed.server(region).api, "ax_http_requests_total", `route="GET /v1/dlq"`)
	}
	fwdCount := func(region string) float64 {
		return metricWhere(t, fed.server(region).api, "ax_forwarded_requests_total")
	}
	before := map[string]float64{}
	fwdBefore := map[string]float64{}
	for _, r := range fed.order {
		before[r], fwdBefore[r] = dlqCount(r), fwdCount(r)
	}
	code, body := fed.rawCall("us-east-1", tokSubmitterA, http.MethodGet, "/v1/dlq", nil,
		map[string]string{"X-Ax-Forwarded": "-12"})
	if code != http.StatusOK {
		t.Fatalf("DLQ listing with a forged hop count: %d %s", code, body)
	}
	time.Sleep(500 * time.Millisecond) // any runaway fan-out would still be going
	for _, r := range fed.order {
		if d := dlqCount(r) - before[r]; d > 1 {
			t.Errorf("%s served %v DLQ requests for one client request (a forwarding storm)", r, d)
		}
		if d := fwdCount(r) - fwdBefore[r]; d > 1 {
			t.Errorf("%s forwarded %v requests for one client request", r, d)
		}
	}

	// A keyed submit with a forged "already forwarded" at both regions: the
	// key's home region answers both, one task.
	spec, _ := json.Marshal(map[string]any{"type": "noop", "idempotency_key": "forged-hop-" + randomHex(4)})
	ids := map[string]bool{}
	for _, r := range fed.order {
		code, body := fed.rawCall(r, tokSubmitterA, http.MethodPost, "/v1/tasks", spec,
			map[string]string{"X-Ax-Forwarded": "1"})
		var resp struct {
			ID string `json:"id"`
		}
		if code/100 != 2 || json.Unmarshal(body, &resp) != nil || resp.ID == "" {
			t.Fatalf("keyed submit to %s: %d %s", r, code, body)
		}
		ids[resp.ID] = true
	}
	if len(ids) != 1 {
		t.Fatalf("one idempotency key, %d tasks: %v", len(ids), ids)
	}
}

// The server's timeouts bound every request, but a
// long-poll (/v1/events?wait=) still gets its whole wait: with read and
// write timeouts of 2s, a 4s wait answers 200 after its wait. An idle
// keep-alive connection is closed after idle_timeout, and a request
// without a token that announces a 50 MB body gets its 401 at once on a
// connection then closed, its body never read.
func TestLongPollOutlivesTheServerTimeouts(t *testing.T) {
	fed := newFederation(t, fedOpts{noWorkers: true, regions: []string{"us-east-1"},
		httpServer: "read_timeout: 2s\nwrite_timeout: 2s\nidle_timeout: 1s\n"})
	addr := strings.TrimPrefix(fed.server("us-east-1").api, "http://")
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	closed := func(r *bufio.Reader) bool { _, err := r.ReadByte(); return errors.Is(err, io.EOF) }
	c, r := dial()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz on a raw connection: %v %v", resp, err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	if !closed(r) {
		t.Fatal("an idle keep-alive connection was not closed (idle_timeout 1s)")
	}
	c, r = dial()
	fmt.Fprintf(c, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{\"type\":")
	if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a 50 MB body without a token: %v %v, want 401 before the body", resp, err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	if !closed(r) {
		t.Fatal("the connection of a 401 stayed open for its body")
	}
	start := time.Now()
	code, body := fed.call("us-east-1", tokSubmitterA, http.MethodGet, "/v1/events?wait=4s", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"events"`) {
		t.Fatalf("a 4s long-poll behind 2s timeouts: %d %s", code, body)
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Fatalf("the long-poll answered after %s, before its wait (nothing happened meanwhile)", took)
	}
	frozenRedisAnswers503BeforeTheWriteTimeout(t, fed)
}

// frozenRedisAnswers503BeforeTheWriteTimeout: with the region's Redis
// SIGSTOPped (connections accepted, never answered) every request that
// needs it is answered 503 unavailable with Retry-After before the server's
// write timeout (2s here), a trail and the cost report included, never an
// empty reply. ax_redis_healthy says so meanwhile. Once
// Redis resumes, submits succeed again.
func frozenRedisAnswers503BeforeTheWriteTimeout(t *testing.T, fed *federation) {
	t.Helper()
	id, _ := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "noop"})
	if id == "" {
		t.Fatal("a submit before the freeze failed")
	}
	rd := fed.region("us-east-1").redis
	rd.Pause()
	t.Cleanup(rd.Resume)
	var wg sync.WaitGroup
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/tasks", map[string]any{"type": "noop"}},
		{http.MethodGet, "/v1/tasks/" + id, nil},
		{http.MethodGet, "/v1/tasks/" + id + "/trail", nil},
		{http.MethodGet, "/v1/tasks?region=us-east-1", nil},
		{http.MethodGet, "/v1/dlq", nil},
		{http.MethodGet, "/v1/cost", nil},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			code, body, hdr := fed.callHeader("us-east-1", tokOperator, c.method, c.path, c.body)
			took := time.Since(start)
			var eb apiv1.ErrorBody
			_ = json.Unmarshal(body, &eb)
			if code != http.StatusServiceUnavailable || eb.Error.Code != "unavailable" || hdr.Get("Retry-After") == "" || took > 2500*time.Millisecond {
				t.Errorf("%s %s with the region's Redis frozen: %d %s (Retry-After %q) after %v, want 503 unavailable with Retry-After within the 2s write timeout",
					c.method, c.path, code, body, hdr.Get("Retry-After"), took)
			}
		}()
	}
	wg.Wait()
	// The outage is on /metrics too (no alert could see it: the leader
	// still led and its figures stayed put).
	api := fed.server("us-east-1").api
	waitUntil(t, 5*time.Second, "ax_redis_healthy 0 with Redis frozen", func() bool { return metric(t, api, "ax_redis_healthy") == 0 })
	rd.Resume()
	waitUntil(t, 20*time.Second, "a submit once Redis resumed", func() bool {
		code, _ := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", map[string]any{"type": "noop"})
		return code == http.StatusCreated
	})
	waitUntil(t, 5*time.Second, "ax_redis_healthy 1 once Redis resumed", func() bool { return metric(t, api, "ax_redis_healthy") == 1 })
}

// 30 long-polls by one tenant do not take the Redis pool: a tenant holds at
// most max_long_polls_per_tenant (2) long-polls, the rest get 429 at once,
// and another tenant's submits and /readyz are unaffected.
func TestLongPollsOfOneTenantDoNotStarveAnother(t *testing.T) {
	fed := newFederation(t, fedOpts{})
	codes := make(chan int, 30)
	for range 30 {
		go func() {
			code, _ := fed.rawCall("us-east-1", tokSubmitterA, http.MethodGet, "/v1/events?wait=1m", nil, nil)
			codes <- code
		}()
	}
	// The 429s come at once; the two admitted long-polls keep waiting.
	saturated := 0
	for range 28 {
		select {
		case c := <-codes:
			if c != http.StatusTooManyRequests {
				t.Fatalf("a long-poll beyond the tenant's cap answered %d, not 429", c)
			}
			saturated++
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of 28 long-polls beyond the cap were refused", saturated)
		}
	}
	for i := range 5 {
		id, _ := fed.submit("us-east-1", tokSubmitterB, map[string]any{"type": "noop"})
		if id == "" {
			t.Fatalf("submit %d of tenant B failed", i)
		}
	}
	if code, body := fed.call("us-east-1", "", http.MethodGet, "/readyz", nil); code != http.StatusOK {
		t.Fatalf("/readyz with the tenant's long-polls held: %d %s", code, body)
	}
}

// A tenant's event stream shows no other tenant's task ids, and a
// tenant-scoped operator cannot drain a region (every tenant's tasks).
func TestTenantTokensSeeNoOtherTenantsEventsAndCannotDrain(t *testing.T) {
	fed := newFederation(t, fedOpts{})
	idB, _ := fed.submit("us-east-1", tokSubmitterB, map[string]any{"type": "noop", "regions": []string{"us-east-1"}})
	waitUntil(t, 10*time.Second, "the submit in the event stream", func() bool {
		_, body := fed.call("us-east-1", tokOperator, http.MethodGet, "/v1/events?after=0&wait=10ms", nil)
		return strings.Contains(string(body), idB)
	})
	code, body := fed.call("us-east-1", tokSubmitterA, http.MethodGet, "/v1/events?after=0&wait=10ms", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"op":"submit"`) || strings.Contains(string(body), idB) {
		t.Fatalf("tenant A's view of the event stream: %d %s", code, body)
	}
	code, body = fed.call("us-east-1", tokOperatorA, http.MethodPost, "/v1/regions/eu-west-1/drain", nil)
	if code != http.StatusForbidden {
		t.Fatalf("a tenant's operator drained a region: %d %s", code, body)
	}
	hostileTenantWalk(t, fed, idB)
	fakeRegionIsNeverContacted(t, fed)
	redisOutageAnswers503(t, fed, idB)
}

// hostileTenantWalk: team-a's tokens (a submitter and an operator of that
// tenant) against team-b's task held at home (idB), one handed off to
// eu-west-1, one dead in eu-west-1's DLQ, a DAG run and a schedule, through
// both regions' servers. Every read and action by id answers as for an id
// that does not exist; listings, reports and bulk actions naming team-b are
// 403 field tenant; team-a may use team-b's schedule name in its own
// namespace; absurd query strings are 400 naming the parameter; oversized
// bodies are 413; a method a path does not serve is 405 with Allow.
func hostileTenantWalk(t *testing.T, fed *federation, idB string) {
	t.Helper()
	handed := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterB, map[string]any{"type": "noop"})
	dead := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterB, map[string]any{"type": "sleep", "payload": map[string]any{}})
	fed.waitState("us-east-1", tokSubmitterB, dead.ID, task.Failed, 20*time.Second)
	fed.waitState("us-east-1", tokSubmitterB, handed.ID, task.Success, 20*time.Second)
	code, body := fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/dags",
		map[string]any{"name": "b-run", "nodes": []map[string]any{{"id": "x", "task": map[string]any{"type": "noop"}}}})
	var run struct {
		ID string `json:"id"`
	}
	if code != http.StatusCreated || json.Unmarshal(body, &run) != nil || run.ID == "" {
		t.Fatalf("team-b's DAG: %d %s", code, body)
	}
	sched := map[string]any{"name": "b-nightly", "cron": "0 0 2 * * *", "task": map[string]any{"type": "noop", "tenant": "team-b"}}
	if code, body := fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/schedules", sched); code != http.StatusCreated {
		t.Fatalf("team-b's schedule: %d %s", code, body)
	}
	// What an id that does not exist answers, per route: team-b's ids must
	// answer the same (status, code, message), so they do not leak.
	missingDAG := "00000000000000000000000000"
	answer := func(region, token, method, path string, body any) string {
		code, b := fed.call(region, token, method, path, body)
		var eb apiv1.ErrorBody
		_ = json.Unmarshal(b, &eb)
		return fmt.Sprintf("%d %s %s %s", code, eb.Error.Code, eb.Error.Field, eb.Error.Message)
	}
	for _, reg := range fed.order {
		for _, id := range []string{idB, handed.ID, dead.ID} {
			for _, c := range []struct {
				token, method, suffix string
				body                  any
			}{
				{tokSubmitterA, http.MethodGet, "", nil},
				{tokSubmitterA, http.MethodGet, "/trail", nil},
				{tokOperatorA, http.MethodPost, "/cancel", nil},
				{tokOperatorA, http.MethodPost, "/replay", nil},
				{tokOperatorA, http.MethodPost, "/priority", map[string]any{"priority": 1}},
			} {
				got := answer(reg, c.token, c.method, "/v1/tasks/"+id+c.suffix, c.body)
				// The same id at time 0: well formed, held nowhere.
				want := answer(reg, c.token, c.method, "/v1/tasks/0000000000"+id[10:]+c.suffix, c.body)
				if !strings.HasPrefix(got, "404 ") || !sameButID(got, want) {
					t.Errorf("team-a: %s %s%s on %s: %q; an id that does not exist: %q", c.method, id, c.suffix, reg, got, want)
				}
			}
		}
		for _, c := range []struct{ token, method, suffix string }{
			{tokSubmitterA, http.MethodGet, ""}, {tokOperatorA, http.MethodPost, "/cancel"},
		} {
			got := answer(reg, c.token, c.method, "/v1/dags/"+run.ID+c.suffix, nil)
			want := answer(reg, c.token, c.method, "/v1/dags/"+missingDAG+c.suffix, nil)
			if !strings.HasPrefix(got, "404 ") || !sameButID(got, want) {
				t.Errorf("team-a: %s DAG %s%s on %s: %q; one that does not exist: %q", c.method, run.ID, c.suffix, reg, got, want)
			}
		}
		for _, c := range []struct{ token, method, suffix string }{
			{tokSubmitterA, http.MethodGet, ""}, {tokOperatorA, http.MethodPost, "/pause"},
			{tokOperatorA, http.MethodPost, "/resume"}, {tokOperatorA, http.MethodDelete, ""},
		} {
			got := answer(reg, c.token, c.method, "/v1/schedules/b-nightly"+c.suffix, nil)
			want := answer(reg, c.token, c.method, "/v1/schedules/no-such-name"+c.suffix, nil)
			if !strings.HasPrefix(got, "404 ") || got != want {
				t.Errorf("team-a: %s schedule b-nightly%s on %s: %q; one that does not exist: %q", c.method, c.suffix, reg, got, want)
			}
		}
		// A stream ticket of team-a follows none of team-b's tasks.
		ticket := func() string {
			code, body := fed.call(reg, tokSubmitterA, http.MethodPost, "/v1/stream/tickets", nil)
			var tk struct {
				Ticket string `json:"ticket"`
			}
			if code != http.StatusCreated || json.Unmarshal(body, &tk) != nil {
				t.Fatalf("a stream ticket: %d %s", code, body)
			}
			return tk.Ticket
		}
		for _, id := range []string{idB, handed.ID} {
			got := answer(reg, "", http.MethodGet, "/v1/stream?task="+id+"&ticket="+ticket(), nil)
			want := answer(reg, "", http.MethodGet, "/v1/stream?task=0000000000"+id[10:]+"&ticket="+ticket(), nil)
			if !strings.HasPrefix(got, "404 ") || !sameButID(got, want) {
				t.Errorf("team-a streaming %s on %s: %q; an id that does not exist: %q", id, reg, got, want)
			}
		}
		// Naming team-b: 403 field tenant, whatever the route.
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, "/v1/tasks?tenant=team-b", nil}, {http.MethodGet, "/v1/dlq?tenant=team-b", nil},
			{http.MethodGet, "/v1/cost?tenant=team-b", nil}, {http.MethodGet, "/v1/dags?tenant=team-b", nil},
			{http.MethodGet, "/v1/schedules?tenant=team-b", nil}, {http.MethodGet, "/v1/schedules/b-nightly?tenant=team-b", nil},
			{http.MethodPost, "/v1/tasks/cancel", map[string]any{"tenant": "team-b", "type": "noop"}},
			{http.MethodPost, "/v1/placement/explain", map[string]any{"type": "noop", "tenant": "team-b"}},
			{http.MethodPost, "/v1/tasks", map[string]any{"type": "noop", "tenant": "team-b"}},
		} {
			if got := answer(reg, tokOperatorA, c.method, c.path, c.body); !strings.HasPrefix(got, "403 permission_denied tenant ") {
				t.Errorf("team-a: %s %s on %s: %q, want 403 naming tenant", c.method, c.path, reg, got)
			}
		}
		// team-a's own listings hold nothing of team-b's.
		for _, path := range []string{"/v1/tasks?limit=1000", "/v1/dlq?limit=1000", "/v1/dags", "/v1/schedules", "/v1/cost?group_by=tenant"} {
			code, b := fed.call(reg, tokOperatorA, http.MethodGet, path, nil)
			if code != http.StatusOK || strings.Contains(string(b), "team-b") || strings.Contains(string(b), dead.ID) ||
				strings.Contains(string(b), "b-nightly") || strings.Contains(string(b), run.ID) {
				t.Errorf("team-a: GET %s on %s: %d %.300s", path, reg, code, b)
			}
		}
	}
	// A name is per tenant: team-a's b-nightly is its own, team-b's stays.
	mine := map[string]any{"name": "b-nightly", "cron": "0 0 3 * * *", "task": map[string]any{"type": "noop"}}
	if code, body := fed.call("eu-west-1", tokOperatorA, http.MethodPost, "/v1/schedules", mine); code != http.StatusCreated {
		t.Errorf("team-a's own b-nightly: %d %s", code, body)
	}
	// Through the real binary: a token of every tenant names the tenant when
	// two use the name; a tenant's token naming another's cost is refused,
	// one line, exit 1.
	api, tok := fed.server("eu-west-1").api, func(name string) string { return fed.token(name) }
	if out, stderr, code := runAx(t, api, "--token", tok(tokOperator), "schedule", "get", "b-nightly"); code != 1 || out != "" ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "team-a, team-b") || !strings.Contains(stderr, "(field tenant)") {
		t.Errorf("ax schedule get b-nightly (two tenants' names): exit %d %q %q", code, out, stderr)
	}
	if out, stderr, code := runAx(t, api, "--token", tok(tokOperator), "schedule", "get", "b-nightly", "--tenant", "team-b"); code != 0 ||
		!strings.Contains(out, "0 0 2 * * *") || !strings.Contains(out, "team-b") {
		t.Errorf("ax schedule get b-nightly --tenant team-b: exit %d %q %q", code, out, stderr)
	}
	if out, stderr, code := runAx(t, api, "--token", tok(tokOperator), "schedule", "list"); code != 0 ||
		strings.Count(out, "b-nightly") != 2 || !strings.Contains(out, "TENANT") {
		t.Errorf("ax schedule list of every tenant: exit %d %q %q", code, out, stderr)
	}
	if out, stderr, code := runAx(t, api, "--token", tok(tokSubmitterA), "cost", "--tenant", "team-b"); code != 3 || out != "" ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "tenant team-a") {
		t.Errorf("ax cost --tenant team-b with team-a's token: exit %d %q %q", code, out, stderr)
	}
	if code, body := fed.call("eu-west-1", tokOperatorA, http.MethodDelete, "/v1/schedules/b-nightly", nil); code != http.StatusOK {
		t.Errorf("team-a deleting its b-nightly: %d %s", code, body)
	}
	if code, body := fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/v1/schedules/b-nightly", nil); code != http.StatusOK ||
		!strings.Contains(string(body), `"cron":"0 0 2 * * *"`) {
		t.Errorf("team-b's b-nightly after team-a's came and went: %d %s", code, body)
	}
	// Absurd query strings: 400 naming the parameter, never a 5xx.
	for q, field := range map[string]string{
		"/v1/tasks?limit=1000000000": "limit", "/v1/tasks?limit=-1": "limit", "/v1/dlq?offset=-5": "offset",
		"/v1/dlq?offset=9223372036854775807": "offset", "/v1/dlq?limit=99999999999999999999": "limit",
		"/v1/dags?limit=0": "limit", "/v1/events?wait=-1s": "wait", "/v1/cost?from=0000-00-00": "from",
		"/v1/tasks?created_after=yesterday": "created_after", "/v1/schedules?limit=5": "limit",
		"/v1/dlq?cursor=zz": "cursor", "/v1/tasks?cursor=zz": "cursor", "/v1/schedules?tenant=a&tenant=b": "tenant",
	} {
		if got := answer("us-east-1", tokSubmitterA, http.MethodGet, q, nil); !strings.HasPrefix(got, "400 invalid_argument "+field+" ") {
			t.Errorf("GET %s: %q, want 400 naming %s", q, got, field)
		}
	}
	// Oversized: a payload over the limit, a body over any limit.
	big := map[string]any{"type": "noop", "payload": map[string]any{"x": strings.Repeat("a", 2<<20)}}
	if got := answer("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", big); !strings.HasPrefix(got, "413 payload_too_large") {
		t.Errorf("a 2 MiB payload: %q, want 413", got)
	}
	if got := answer("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks/batch", bytes.Repeat([]byte(" "), 20<<20)); !strings.HasPrefix(got, "413 payload_too_large") {
		t.Errorf("a 20 MiB batch body: %q, want 413", got)
	}
	code, body, hdr := fed.callHeader("us-east-1", tokSubmitterA, http.MethodDelete, "/v1/tasks", nil)
	if code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, HEAD, POST" || apiErr(t, body).Code != apiv1.CodeMethodNotAllowed {
		t.Errorf("DELETE /v1/tasks: %d Allow %q %s", code, hdr.Get("Allow"), body)
	}
}

// sameButID reports whether two answers differ at most in the ids they
// name (a message may quote the id asked for).
func sameButID(a, b string) bool {
	strip := func(s string) string {
		var out []string
		for _, w := range strings.Fields(s) {
			if strings.Count(w, ".") >= 2 || len(strings.Trim(w, `"'`)) >= 20 {
				w = "ID"
			}
			out = append(out, w)
		}
		return strings.Join(out, " ")
	}
	return strip(a) == strip(b)
}

// fakeRegionIsNeverContacted: a region written into the global
// etcd by someone who can reach it but is not in `regions:` — the cheapest
// pools of all, kept fresh — receives no request (so never the cluster
// token) and no task: tasks submitted meanwhile run in the federation's
// own regions.
func fakeRegionIsNeverContacted(t *testing.T, fed *federation) {
	t.Helper()
	var calls atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"accepted":true}`))
	}))
	defer evil.Close()
	cli := fed.global.Client()
	ctx := context.Background()
	got, err := cli.Get(ctx, "/ax/regions/us-east-1")
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("us-east-1's registration: %v %v", err, got)
	}
	var fig region.Figures
	if err := json.Unmarshal(got.Kvs[0].Value, &fig); err != nil {
		t.Fatal(err)
	}
	fig.Region, fig.API, fig.Leader = "evil-1", evil.URL, "evil"
	for i := range fig.Pools {
		fig.Pools[i].PricePerSlotHour = 1e-9
		fig.Pools[i].Ready, fig.Pools[i].Running = 0, 0
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // kept fresh, as an attacker would
		defer close(done)
		for {
			fig.UpdatedAt = time.Now()
			b, _ := json.Marshal(fig)
			_, _ = cli.Put(ctx, "/ax/regions/evil-1", string(b))
			select {
			case <-stop:
				_, _ = cli.Delete(ctx, "/ax/regions/evil-1")
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-done }()
	time.Sleep(500 * time.Millisecond) // every server's watch has seen it
	var ids []string
	for range 3 {
		id, _ := fed.submit("us-east-1", tokSubmitterB, map[string]any{"type": "noop"})
		ids = append(ids, id)
	}
	for _, id := range ids {
		if tk := fed.waitState("us-east-1", tokSubmitterB, id, task.Success, 20*time.Second); tk.HeldBy != "us-east-1" && tk.HeldBy != "eu-west-1" {
			t.Fatalf("task %s ran in %q with a fake region registered", id, tk.HeldBy)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the fake region (not in regions:) got %d requests", n)
	}
}

// redisOutageAnswers503: with us-east-1's Redis
// killed, every route family of its server that needs that Redis (tasks,
// DAGs, schedules' quota, cost, events and streams) answers 503
// unavailable with Retry-After and a message that names no Redis detail;
// none answers 500. Routes that need no Redis (stream tickets, schedule
// reads in etcd) still answer. It kills the Redis: call it last.
func redisOutageAnswers503(t *testing.T, fed *federation, id string) {
	t.Helper()
	// A's task that eu-west-1 handed to us-east-1: with its holder's Redis
	// down, eu-west-1 answers A 503 and B as it answers an id that does
	// not exist (404), so the outage does not tell B the id is one.
	handed := fed.handedOffTask("eu-west-1", "us-east-1", tokSubmitterA, map[string]any{"type": "noop"})
	other := []byte(handed.ID) // an id of eu-west-1 that was never issued
	if other[6] == 'a' {
		other[6] = 'b'
	} else {
		other[6] = 'a'
	}
	fed.region("us-east-1").redis.Kill()
	for _, c := range []struct {
		token, path string
		code        int
	}{
		{tokSubmitterA, "/v1/tasks/" + handed.ID, http.StatusServiceUnavailable},
		{tokSubmitterB, "/v1/tasks/" + handed.ID, http.StatusNotFound},
		{tokSubmitterB, "/v1/tasks/" + handed.ID + "/trail", http.StatusNotFound},
		{tokSubmitterB, "/v1/tasks/" + string(other), http.StatusNotFound},
	} {
		if code, body := fed.call("eu-west-1", c.token, http.MethodGet, c.path, nil); code != c.code {
			t.Errorf("GET %s (%s) in eu-west-1 with its holder us-east-1 down: %d %s, want %d", c.path, c.token, code, body, c.code)
		}
	}
	ticket := func() string {
		code, body := fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/stream/tickets", nil)
		var tk struct {
			Ticket string `json:"ticket"`
		}
		if code != http.StatusCreated || json.Unmarshal(body, &tk) != nil || tk.Ticket == "" {
			t.Fatalf("a stream ticket (no Redis needed) during the outage: %d %s", code, body)
		}
		return tk.Ticket
	}
	noop := map[string]any{"type": "noop", "regions": []string{"us-east-1"}}
	dag := map[string]any{"name": "d", "nodes": []map[string]any{{"id": "a", "task": noop}}}
	sched := map[string]any{"name": "outage-nightly", "cron": "0 0 2 * * *", "task": map[string]any{"type": "noop", "tenant": "team-c"}}
	// At once: a call to a dead Redis takes its client's retries (≈ 1.7 s).
	var wg sync.WaitGroup
	for _, c := range []struct {
		method, path string
		token        string
		body         any
	}{
		{http.MethodPost, "/v1/tasks", tokSubmitterB, noop},
		{http.MethodGet, "/v1/tasks/" + id, tokSubmitterB, nil},
		{http.MethodGet, "/v1/tasks/" + id + "/trail", tokSubmitterB, nil},
		{http.MethodPost, "/v1/tasks/" + id + "/cancel", tokOperator, nil},
		{http.MethodGet, "/v1/tasks?region=us-east-1", tokSubmitterB, nil},
		{http.MethodGet, "/v1/dlq?region=us-east-1", tokSubmitterB, nil},
		{http.MethodPost, "/v1/dags", tokSubmitterB, dag},
		{http.MethodGet, "/v1/cost?region=us-east-1", tokSubmitterB, nil},
		{http.MethodGet, "/v1/events?wait=10ms", tokSubmitterB, nil},
		{http.MethodGet, "/v1/stream?task=" + id + "&ticket=" + ticket(), "", nil},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, hdr := fed.callHeader("us-east-1", c.token, c.method, c.path, c.body)
			var eb apiv1.ErrorBody
			_ = json.Unmarshal(body, &eb)
			if e := eb.Error; code != http.StatusServiceUnavailable || e.Code != "unavailable" || hdr.Get("Retry-After") == "" ||
				strings.Contains(strings.ToLower(e.Message), "redis") || strings.Contains(e.Message, "127.0.0.1") {
				t.Errorf("%s %s with us-east-1's Redis down: %d %s (Retry-After %q), want 503 unavailable with Retry-After and no detail",
					c.method, c.path, code, body, hdr.Get("Retry-After"))
			}
		}()
	}
	wg.Wait()
	// A batch answers per item, a listing of every region per region: the
	// outage is each one's 503 (with its retry), the rest is answered.
	code, body := fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks/batch", map[string]any{"tasks": []any{noop}})
	if code != http.StatusOK || !strings.Contains(string(body), `"status":503,"error":{"code":"unavailable"`) ||
		!strings.Contains(string(body), `"retry_after_seconds":`) {
		t.Errorf("a batch during the Redis outage: %d %s, want its item 503 unavailable with a retry", code, body)
	}
	code, body = fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/v1/dags", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"unavailable":["us-east-1"]`) {
		t.Errorf("DAG runs of every region during us-east-1's Redis outage: %d %s, want eu-west-1's and us-east-1 unavailable", code, body)
	}
	// Schedules live in etcd (a tenant without quotas needs no Redis).
	if code, body := fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/schedules", sched); code != http.StatusCreated {
		t.Errorf("a schedule (etcd) during the Redis outage: %d %s", code, body)
	}
	if code, body := fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/v1/schedules", nil); code != http.StatusOK {
		t.Errorf("schedules (etcd) during the Redis outage: %d %s", code, body)
	}
}

// SIGHUP reloads the API tokens from the file: a token removed from the
// file stops working, the server keeps serving.
func TestSIGHUPReloadsTokensAndKeepsServing(t *testing.T) {
	fed := newFederation(t, fedOpts{noWorkers: true, regions: []string{"us-east-1"}})
	r := fed.region("us-east-1")
	b, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// Drop tenant B's submitter token (one line) from the file.
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "name: "+tokSubmitterB+",") {
			kept = append(kept, l)
		}
	}
	if len(kept) == len(strings.Split(string(b), "\n")) {
		t.Fatalf("no %s in the config:\n%s", tokSubmitterB, b)
	}
	if err := os.WriteFile(r.cfgPath, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	fed.server("us-east-1").signal(syscall.SIGHUP)
	waitUntil(t, 10*time.Second, "the removed token refused", func() bool {
		code, _ := fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/v1/regions", nil)
		return code == http.StatusUnauthorized
	})
	if code, body := fed.call("us-east-1", tokSubmitterA, http.MethodGet, "/v1/regions", nil); code != http.StatusOK {
		t.Fatalf("after SIGHUP a kept token: %d %s", code, body)
	}
	// The same SIGHUP to a worker (one `kill -HUP` to every ax process)
	// reloads nothing and never ends it: it ended it at once, its running
	// tasks left to expire. The region's only worker runs a task after it.
	w := fed.startWorker("us-east-1", "cpu")
	fed.waitPlaceable()
	w.signal(syscall.SIGHUP)
	time.Sleep(200 * time.Millisecond)
	id, _ := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "noop"})
	fed.waitState("us-east-1", tokSubmitterA, id, task.Success, 20*time.Second)
	if !strings.Contains(w.log.String(), "SIGHUP: ax worker reloads nothing") {
		t.Errorf("the worker did not say what it did with the SIGHUP:\n%s", w.log.String())
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// Finding 2 of issue 11: X-Ax-Forwarded was trusted from any token. A DLQ
// listing with -12 from a submitter became thousands of requests between
// the regions; 1 on a keyed submit made the receiving server skip routing,
// so two regions each kept a task under one idempotency key. Now only the
// cluster token's hop count counts.
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

// Finding 7 of issue 11: the server's timeouts bound every request, but a
// long-poll (/v1/events?wait=) still gets its whole wait: with read and
// write timeouts of 2s, a 4s wait answers 200 after its wait.
func TestLongPollOutlivesTheServerTimeouts(t *testing.T) {
	fed := newFederation(t, fedOpts{noWorkers: true, regions: []string{"us-east-1"},
		httpServer: "read_timeout: 2s\nwrite_timeout: 2s\n"})
	start := time.Now()
	code, body := fed.call("us-east-1", tokSubmitterA, http.MethodGet, "/v1/events?wait=4s", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"events"`) {
		t.Fatalf("a 4s long-poll behind 2s timeouts: %d %s", code, body)
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Fatalf("the long-poll answered after %s, before its wait (nothing happened meanwhile)", took)
	}
}

// Finding 3 of issue 11: 30 long-polls by one tenant took the Redis pool;
// another tenant's submit failed with 500 and /readyz answered 503. Now a
// tenant holds at most max_long_polls_per_tenant (2) long-polls, the rest
// get 429 at once, and the other tenant and /readyz are unaffected.
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

// Finding 10 of issue 11: the event stream showed other tenants' task ids
// and a tenant-scoped operator drained a region (every tenant's tasks).
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
}

// Finding 10 of issue 11: SIGHUP killed the server. Now it reloads the API
// tokens from the file: a token removed from the file stops working, the
// server keeps serving.
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
}

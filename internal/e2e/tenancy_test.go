package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// apiErr reads an error body.
func apiErr(t *testing.T, body []byte) apiv1.Error {
	t.Helper()
	var eb apiv1.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("not an error body: %s", body)
	}
	return eb.Error
}

// Tenancy through real servers with auth on and two regions: a tenant flooding submits gets 429 quota_exceeded with
// Retry-After while another tenant's submits all succeed; batches are
// capped in items and bytes (naming the field); priority 0 and critical
// are for operator tokens (403 naming the field, in DAG nodes too);
// /metrics and /readyz's details need a token; an expired token is 401
// token_expired.
func TestTenantQuotasTrustAndExpiry(t *testing.T) {
	const expired = "expired-token-0123456789abcdef"
	fed := newFederation(t, fedOpts{privateDetails: true,
		tokens: `- {name: old, token: ` + expired + `, role: submitter, tenant: team-a, expires_at: "2020-01-01T00:00:00Z"}
- {name: dated, token: dated-token-0123456789abcdef, role: submitter, tenant: team-b, expires_at: "2099-01-01T00:00:00Z"}
- {name: c, token: submitter-c-0123456789abcdef, role: submitter, tenant: team-c}`,
		extra: `quotas:
  tenants:
    team-a: {submits_per_second: 1, burst: 5}
    team-c: {max_backlog: 3}
  batch: {max_items: 20, max_bytes: 1114112}
`})
	fed.tokens["old"], fed.tokens["dated"], fed.tokens["c"] = expired, "dated-token-0123456789abcdef", "submitter-c-0123456789abcdef"
	noop := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}}

	// Tenant A floods both servers of us-east-1; tenant B submits meanwhile.
	// The bucket is the region's (in its Redis): two servers grant the
	// rate once, not twice.
	apis := []string{fed.server("us-east-1").api, fed.startServer("us-east-1").api}
	fed.waitPlaceable()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]map[int]int{"a": {}, "b": {}}
	var limited []byte
	var retryAfter string
	start := time.Now()
	for i := 0; i < 40; i++ {
		who, tok := "a", tokSubmitterA
		if i%4 == 0 {
			who, tok = "b", tokSubmitterB
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, hdr := fed.callAPIHeader(apis[(i+i/4)%2], tok, http.MethodPost, "/v1/tasks", noop)
			mu.Lock()
			defer mu.Unlock()
			codes[who][code]++
			if code == http.StatusTooManyRequests && limited == nil {
				limited, retryAfter = body, hdr.Get("Retry-After")
			}
		}()
	}
	wg.Wait()
	// The bucket holds 5 and refills 1/s: what the flood's duration lets in.
	most := 5 + int(time.Since(start).Seconds()) + 1
	if codes["b"][http.StatusCreated] != 10 || len(codes["b"]) != 1 {
		t.Fatalf("tenant B's submits while A floods: %v, want 10 × 201", codes["b"])
	}
	if a := codes["a"]; a[http.StatusCreated] < 5 || a[http.StatusCreated] > most || a[http.StatusCreated]+a[http.StatusTooManyRequests] != 30 {
		t.Fatalf("tenant A's flood: %v, want 5 to %d accepted (the burst and the refill), the rest 429", codes["a"], most)
	}
	if e := apiErr(t, limited); e.Code != apiv1.CodeQuotaExceeded || retryAfter == "" || e.RetryAfterSeconds < 1 ||
		!strings.Contains(e.Message, "team-a") {
		t.Fatalf("429: %+v, Retry-After %q", e, retryAfter)
	}

	// A DAG's nodes are submits: right after the flood emptied A's bucket
	// (refilled at 1/s) a DAG of 5 nodes does not fit; 6 never fit.
	var nodes []map[string]any
	for i := range 6 {
		nodes = append(nodes, map[string]any{"id": string(rune('a' + i)), "task": noop})
	}
	code, body, _ := fed.callHeader("us-east-1", tokSubmitterA, http.MethodPost, "/v1/dags", map[string]any{"name": "five", "nodes": nodes[:5]})
	if e := apiErr(t, body); code != http.StatusTooManyRequests || e.Code != apiv1.CodeQuotaExceeded {
		t.Fatalf("tenant A's DAG of 5 nodes right after its flood emptied its bucket: %d %s", code, body)
	}
	code, body = fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/dags", map[string]any{"name": "six", "nodes": nodes})
	if e := apiErr(t, body); code != http.StatusBadRequest || e.Field != "nodes" || !strings.Contains(e.Message, "burst") {
		t.Fatalf("tenant A's DAG of 6 nodes over a burst of 5: %d %s", code, body)
	}

	// max_backlog: tenant C may leave 3 unfinished tasks in a region (here
	// delayed an hour); the 4th is 429 naming the quota, in a batch too; a
	// cancel makes room.
	later := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}, "delay": "1h"}
	var waiting []string
	for range 3 {
		id, _ := fed.submit("us-east-1", "c", later)
		waiting = append(waiting, id)
	}
	code, body, hdr := fed.callHeader("us-east-1", "c", http.MethodPost, "/v1/tasks", later)
	if e := apiErr(t, body); code != http.StatusTooManyRequests || e.Code != apiv1.CodeQuotaExceeded ||
		e.Field != "max_backlog" || hdr.Get("Retry-After") == "" || !strings.Contains(e.Message, "team-c") {
		t.Fatalf("tenant C's 4th unfinished task (max_backlog 3): %d %s", code, body)
	}
	code, body = fed.call("us-east-1", "c", http.MethodPost, "/v1/tasks/batch", map[string]any{"tasks": []any{later}})
	if !strings.Contains(string(body), `"field":"tasks[0].max_backlog"`) || !strings.Contains(string(body), `"rejected":1`) {
		t.Fatalf("tenant C's batch over max_backlog: %d %s", code, body)
	}
	if code, body := fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/tasks/"+waiting[0]+"/cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
	code, body = fed.call("us-east-1", "c", http.MethodPost, "/v1/tasks", later)
	var fourth apiv1.SubmitResponse
	if code != http.StatusCreated || json.Unmarshal(body, &fourth) != nil {
		t.Fatalf("tenant C's submit after a cancel made room: %d %s", code, body)
	}
	waiting = append(waiting, fourth.ID)
	// DAGs and schedules are tasks to come: their nodes (a schedule: one)
	// count against the backlog, and against the submit rate.
	oneNode := map[string]any{"name": "one", "nodes": []map[string]any{{"id": "a", "task": noop}}}
	code, body = fed.call("us-east-1", "c", http.MethodPost, "/v1/dags", oneNode)
	if e := apiErr(t, body); code != http.StatusTooManyRequests || e.Field != "max_backlog" {
		t.Fatalf("tenant C's DAG at its max_backlog: %d %s", code, body)
	}
	nightly := map[string]any{"name": "c-nightly", "cron": "0 0 2 * * *",
		"task": map[string]any{"type": "noop", "tenant": "team-c"}}
	code, body = fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/schedules", nightly)
	if e := apiErr(t, body); code != http.StatusTooManyRequests || e.Field != "max_backlog" {
		t.Fatalf("a schedule for tenant C at its max_backlog: %d %s", code, body)
	}
	// Schedules (every second, if one likes) are an operator's to create.
	if code, body = fed.call("us-east-1", "c", http.MethodPost, "/v1/schedules", nightly); code != http.StatusForbidden {
		t.Fatalf("a submitter's schedule: %d %s, want 403", code, body)
	}
	// A DAG reserves room for all its nodes in the count the submits check:
	// with the backlog empty, of three DAGs of 2 nodes created at once on
	// both servers one fits (a creation that read the count let all three
	// in). Cancelled, it gives its room back (its WAITING node never ran):
	// then 3 tasks fit again.
	for _, id := range waiting[1:] {
		if code, body := fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/tasks/"+id+"/cancel", nil); code != http.StatusOK {
			t.Fatalf("cancel: %d %s", code, body)
		}
	}
	pair := map[string]any{"name": "pair", "nodes": []map[string]any{{"id": "a", "task": later},
		{"id": "b", "depends_on": []string{"a"}, "task": noop}}}
	dagCodes := map[int]int{}
	var made string
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, _ := fed.callAPIHeader(apis[i%2], "c", http.MethodPost, "/v1/dags", pair)
			mu.Lock()
			defer mu.Unlock()
			dagCodes[code]++
			if code == http.StatusCreated {
				var st apiv1.DAGStatus
				_ = json.Unmarshal(body, &st)
				made = st.ID
			} else if e := apiErr(t, body); e.Field != "max_backlog" {
				t.Errorf("a refused DAG: %d %s", code, body)
			}
		}()
	}
	wg.Wait()
	if dagCodes[http.StatusCreated] != 1 || dagCodes[http.StatusTooManyRequests] != 2 {
		t.Fatalf("three DAGs of 2 nodes at once for max_backlog 3: %v, want one 201 and two 429", dagCodes)
	}
	if code, body := fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/dags/"+made+"/cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel DAG: %d %s", code, body)
	}
	fits := 0
	for deadline := time.Now().Add(20 * time.Second); fits < 3 && time.Now().Before(deadline); {
		if code, _ := fed.call("us-east-1", "c", http.MethodPost, "/v1/tasks", later); code == http.StatusCreated {
			fits++
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if fits != 3 {
		t.Fatalf("after the DAG was cancelled tenant C fit %d of 3 tasks: its room did not come back", fits)
	}
	// Hand-offs count against the receiver's backlog: tenant C, at its
	// limit in us-east-1, submits in eu-west-1 a task only us-east-1 may
	// run. us-east-1 refuses the hand-off definitely; eu-west-1 keeps the
	// task (PENDING, HANDOFF_REFUSED) and, while us-east-1 refuses C,
	// answers such a submit 429 naming max_backlog.
	onlyEast := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}, "regions": []string{"us-east-1"}}
	sent, _ := fed.submit("eu-west-1", "c", onlyEast)
	refusedOnce := func() bool {
		for _, st := range fed.trail("eu-west-1", "c", sent) {
			if st.Reason == task.ReasonHandOffRefused {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(15 * time.Second); !refusedOnce() && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	if kept, _ := fed.getTask("eu-west-1", "c", sent); kept.State != task.Pending || !refusedOnce() {
		t.Fatalf("tenant C's task for us-east-1 (at its max_backlog there): %s %s, want PENDING at home after a %s step",
			kept.State, kept.Reason, task.ReasonHandOffRefused)
	}
	if _, err := fed.region("us-east-1").store.Get(context.Background(), sent); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("us-east-1 holds the task it refused: %v", err)
	}
	code, body, hdr = fed.callHeader("eu-west-1", "c", http.MethodPost, "/v1/tasks", onlyEast)
	if e := apiErr(t, body); code != http.StatusTooManyRequests || e.Field != "max_backlog" || hdr.Get("Retry-After") == "" {
		t.Fatalf("tenant C's next submit for us-east-1 only: %d %s", code, body)
	}

	// Batch caps, from tenant B (no rate limit).
	batch := func(n, payload int) map[string]any {
		var ts []map[string]any
		for range n {
			ts = append(ts, map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"},
				"payload": map[string]string{"pad": strings.Repeat("x", payload)}})
		}
		return map[string]any{"tasks": ts}
	}
	code, body = fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks/batch", batch(21, 1))
	if e := apiErr(t, body); code != http.StatusBadRequest || e.Field != "tasks" || !strings.Contains(e.Message, "1 to 20") {
		t.Fatalf("a batch of 21 (max_items 20): %d %s", code, body)
	}
	code, body = fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks/batch", batch(3, 400_000))
	if e := apiErr(t, body); code != http.StatusRequestEntityTooLarge || e.Field != "tasks" {
		t.Fatalf("a 1.2 MB batch (max_bytes 1114112): %d %s", code, body)
	}
	if code, body = fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks/batch", batch(20, 1)); code != http.StatusOK {
		t.Fatalf("a batch of 20: %d %s", code, body)
	}
	// More tasks at once than tenant A's burst: never fits, 400.
	code, body = fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks/batch", batch(6, 1))
	if e := apiErr(t, body); code != http.StatusBadRequest || e.Field != "tasks" || !strings.Contains(e.Message, "burst") {
		t.Fatalf("a batch of 6 over a burst of 5: %d %s", code, body)
	}

	// Trust: priority 0 and critical are operators'.
	for _, c := range []struct {
		field string
		spec  map[string]any
	}{
		{"priority", map[string]any{"type": "noop", "priority": 0}},
		{"critical", map[string]any{"type": "noop", "critical": true}},
	} {
		code, body := fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks", c.spec)
		if e := apiErr(t, body); code != http.StatusForbidden || e.Field != c.field {
			t.Fatalf("a submitter's %s: %d %s", c.field, code, body)
		}
		sp := map[string]any{"tenant": "team-b"}
		for k, v := range c.spec {
			sp[k] = v
		}
		if code, body := fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/tasks", sp); code != http.StatusCreated {
			t.Fatalf("an operator's %s: %d %s", c.field, code, body)
		}
	}
	dag := map[string]any{"name": "urgent", "nodes": []map[string]any{
		{"id": "a", "task": map[string]any{"type": "noop"}},
		{"id": "b", "depends_on": []string{"a"}, "task": map[string]any{"type": "noop", "priority": 0}}}}
	code, body = fed.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/dags", dag)
	if e := apiErr(t, body); code != http.StatusForbidden || e.Field != "nodes[1].task.priority" {
		t.Fatalf("a submitter's DAG with a priority 0 node: %d %s", code, body)
	}

	// /metrics (tenant names in labels) needs a token of every tenant,
	// /readyz's details a token.
	if code, body := fed.call("us-east-1", "", http.MethodGet, "/metrics", nil); code != http.StatusUnauthorized ||
		strings.Contains(string(body), "team-a") {
		t.Fatalf("/metrics without a token: %d %.200s", code, body)
	}
	if code, body := fed.call("us-east-1", "", http.MethodGet, "/readyz", nil); code != http.StatusOK ||
		strings.TrimSpace(string(body)) != `{"ready":true}` {
		t.Fatalf("/readyz without a token: %d %s", code, body)
	}
	// A token of one tenant is refused: the labels name every tenant.
	for _, tok := range []string{tokSubmitterB, tokOperatorA} {
		if code, body := fed.call("us-east-1", tok, http.MethodGet, "/metrics", nil); code != http.StatusForbidden ||
			apiErr(t, body).Code != apiv1.CodeForbidden || strings.Contains(string(body), "team-") {
			t.Fatalf("/metrics with %s's token: %d %.200s", tok, code, body)
		}
	}
	if code, body := fed.call("us-east-1", tokOperator, http.MethodGet, "/metrics", nil); code != http.StatusOK ||
		!strings.Contains(string(body), `tenant="team-b"`) {
		t.Fatalf("/metrics with a token of every tenant: %d %.200s", code, body)
	}
	if code, body := fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/readyz", nil); code != http.StatusOK ||
		!strings.Contains(string(body), `"region":"us-east-1"`) {
		t.Fatalf("/readyz with a token: %d %s", code, body)
	}

	// Token expiry.
	code, body = fed.call("us-east-1", "old", http.MethodGet, "/v1/regions", nil)
	if e := apiErr(t, body); code != http.StatusUnauthorized || e.Code != apiv1.CodeTokenExpired || e.Field != "Authorization" {
		t.Fatalf("an expired token: %d %s", code, body)
	}
	if code, body = fed.call("eu-west-1", "dated", http.MethodGet, "/v1/regions", nil); code != http.StatusOK {
		t.Fatalf("a token expiring in 2099: %d %s", code, body)
	}
}

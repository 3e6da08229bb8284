package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/task"
)

// Batches with callbacks through real processes, auth on, two regions of
// two servers: members placed in both regions (handed off to the other),
// the callback stored once with the batch's outcome in its payload and run
// once; bad input refused naming the field with nothing stored; a cancel
// from the other region; and the leader of the region where the last
// member runs SIGKILLed as it finishes: the callback still runs once.
func TestBatchesWithCallbacksAcrossRegions(t *testing.T) {
	t.Parallel()
	const home, away = "us-east-1", "eu-west-1"
	fed := newFederation(t, fedOpts{servers: 2, worker: `exec: {allow: {fail: {argv: [/bin/false]}}}`})
	sleep := func(region string, ms int) map[string]any {
		return map[string]any{"type": "sleep", "payload": map[string]int{"ms": ms}, "regions": []string{region}, "tags": map[string]string{"class": "cpu"}}
	}
	// waitBatch waits until the batch, read through api, has stored its
	// callbacks.
	waitBatch := func(t *testing.T, api, id string) apiv1.BatchStatus {
		var st apiv1.BatchStatus
		waitUntil(t, 60*time.Second, "batch "+id+" to complete and store its callback", func() bool {
			st = apiv1.BatchStatus{}
			code, body := fed.callAPI(api, tokSubmitterA, http.MethodGet, "/v1/batches/"+id, nil)
			return code == http.StatusOK && json.Unmarshal(body, &st) == nil && st.State == apiv1.BatchCompleted &&
				st.Callback == apiv1.BatchCallbackSent
		})
		return st
	}
	// callbackRanOnce waits for the callback task id to succeed and checks
	// it ran once; it returns the outcome its payload carried.
	callbackRanOnce := func(t *testing.T, api, id string) apiv1.BatchOutcome {
		var tk task.Task
		waitUntil(t, 30*time.Second, "callback "+id+" to succeed", func() bool {
			code, body := fed.callAPI(api, tokSubmitterA, http.MethodGet, "/v1/tasks/"+id, nil)
			return code == http.StatusOK && json.Unmarshal(body, &tk) == nil && tk.State == task.Success
		})
		if tk.Attempts != 1 {
			t.Fatalf("callback %s ran %d attempts", id, tk.Attempts)
		}
		var out apiv1.BatchOutcome
		if err := json.Unmarshal(tk.Payload, &out); err != nil {
			t.Fatalf("callback payload %s: %v", tk.Payload, err)
		}
		return out
	}

	t.Run("members in two regions, one failed: on_complete runs once, on_success never", func(t *testing.T) {
		fed := fed.on(t)
		c, err := client.New(fed.server(home).api, client.WithToken(fed.token(tokSubmitterA)), client.WithHTTPClient(fed.http))
		if err != nil {
			t.Fatal(err)
		}
		raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
		req := apiv1.BatchCreate{Name: "nightly",
			OnComplete: raw(map[string]any{"type": "noop", "payload": map[string]string{"report": "ops"}}),
			OnSuccess:  raw(map[string]any{"type": "noop"})}
		for range 3 {
			req.Tasks = append(req.Tasks, raw(sleep(away, 800)))
		}
		req.Tasks = append(req.Tasks, raw(sleep(home, 300)),
			raw(map[string]any{"type": "exec", "payload": map[string]string{"command": "fail"}, "max_retries": 0, "regions": []string{away}}))
		st, err := client.CreateBatch(context.Background(), c, req)
		if err != nil || st.Counts.Total != 5 || len(st.Rejected) != 0 || st.Tenant != "team-a" || st.Region != home {
			t.Fatalf("create: %+v %v", st, err)
		}
		// Read from the other region (the home answers through it).
		done := waitBatch(t, fed.server(away).api, st.ID)
		if done.Counts != (apiv1.BatchCounts{Total: 5, Succeeded: 4, Failed: 1}) || len(done.Failed) != 1 || done.OnSuccessID != "" {
			t.Fatalf("batch: %+v", done)
		}
		// The failed member ran in eu-west-1: handed off from its home.
		h, err := fed.region(home).store.Get(context.Background(), done.Failed[0])
		if err != nil || h.State != task.HandedOff || h.HandedOffTo != away {
			t.Fatalf("failed member in its home region: %+v %v", h, err)
		}
		out := callbackRanOnce(t, fed.server(away).api, done.OnCompleteID)
		if out.BatchID != st.ID || out.Callback != "on_complete" || out.Counts != done.Counts || len(out.Failed) != 1 ||
			out.Failed[0] != done.Failed[0] || string(out.Payload) != `{"report":"ops"}` {
			t.Fatalf("outcome %+v", out)
		}
		// Another tenant sees no such batch; the CLI shows it.
		if code, body := fed.call(home, tokSubmitterB, http.MethodGet, "/v1/batches/"+st.ID, nil); code != http.StatusNotFound {
			t.Fatalf("another tenant's read: %d %s", code, body)
		}
		out2, errOut, exit := runAx(t, fed.server(away).api, "--token", fed.token(tokSubmitterA), "batch", "get", st.ID)
		if exit != 0 || !strings.Contains(out2, "COMPLETED") || !strings.Contains(out2, "5: 4 succeeded, 1 failed") {
			t.Fatalf("ax batch get: exit %d\n%s\n%s", exit, out2, errOut)
		}
		// Listed from the other region too (every region's batches,
		// merged), and not to another tenant.
		for _, c := range []struct {
			token string
			want  bool
		}{{tokSubmitterA, true}, {tokSubmitterB, false}} {
			code, body := fed.call(away, c.token, http.MethodGet, "/v1/batches?limit=500", nil)
			var l apiv1.BatchList
			if code != http.StatusOK || json.Unmarshal(body, &l) != nil || len(l.Unavailable) != 0 || len(l.Regions) != 2 {
				t.Fatalf("list via %s: %d %s", away, code, body)
			}
			found := slices.ContainsFunc(l.Batches, func(b apiv1.BatchStatus) bool { return b.ID == st.ID })
			if found != c.want {
				t.Fatalf("list via %s as %s: batch %s listed %v, want %v: %s", away, c.token, st.ID, found, c.want, body)
			}
		}
		out2, errOut, exit = runAx(t, fed.server(away).api, "--token", fed.token(tokSubmitterA), "batch", "ls")
		if exit != 0 || !strings.Contains(out2, st.ID) {
			t.Fatalf("ax batch ls via %s: exit %d\n%s\n%s", away, exit, out2, errOut)
		}
	})

	t.Run("idempotency", func(t *testing.T) {
		fed := fed.on(t)
		key := "nightly-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		// A member for each region: whichever is the key's home (where the
		// batch lives), one member is handed off to the other.
		body := func(ms int) []byte {
			b, _ := json.Marshal(map[string]any{"name": "idem", "idempotency_key": key,
				"tasks": []any{sleep(away, ms), sleep(home, ms)}, "on_complete": map[string]any{"type": "noop"}})
			return b
		}
		before := batchRecords(t, fed)
		create := func(api, token string, b []byte) (int, apiv1.BatchStatus, apiv1.Error, http.Header) {
			code, resp, hdr := fed.callAPIHeader(api, token, http.MethodPost, "/v1/batches", b)
			var st apiv1.BatchStatus
			var e struct{ Error apiv1.Error }
			_ = json.Unmarshal(resp, &st)
			_ = json.Unmarshal(resp, &e)
			return code, st, e.Error, hdr
		}
		code, first, _, _ := create(fed.server(home).api, tokSubmitterA, body(300))
		if code != http.StatusCreated || first.Duplicate || first.Counts.Total != 2 || first.Tenant != "team-a" {
			t.Fatalf("create: %d %+v", code, first)
		}
		// The same request again through every server of both regions: the
		// first batch, nothing created.
		for _, name := range fed.order {
			for _, s := range fed.region(name).servers {
				code, st, e, _ := create(s.api, tokSubmitterA, body(300))
				if code != http.StatusOK || !st.Duplicate || st.ID != first.ID || st.Counts.Total != 2 {
					t.Fatalf("repeat via %s: %d %+v %+v, want 200 with %s", name, code, st, e, first.ID)
				}
			}
		}
		// The CLI's repeat prints the same id.
		lines := filepath.Join(t.TempDir(), "tasks.jsonl")
		var jl []byte
		for _, m := range []map[string]any{sleep(away, 300), sleep(home, 300)} {
			b, _ := json.Marshal(m)
			jl = append(append(jl, b...), '\n')
		}
		if err := os.WriteFile(lines, jl, 0o600); err != nil {
			t.Fatal(err)
		}
		var cliIDs []string
		for _, region := range []string{away, home} {
			out, errOut, exit := runAx(t, fed.server(region).api, "--token", fed.token(tokSubmitterA), "batch", "submit", "-f", lines,
				"--name", "idem-cli", "--idempotency-key", key+"-cli", "--on-complete", `{"type":"noop"}`)
			if exit != 0 {
				t.Fatalf("ax batch submit via %s: exit %d\n%s\n%s", region, exit, out, errOut)
			}
			cliIDs = append(cliIDs, strings.TrimSpace(out))
		}
		if cliIDs[0] == "" || cliIDs[0] != cliIDs[1] {
			t.Fatalf("ax batch submit twice with one key: %q", cliIDs)
		}
		// The key with another request: 409 naming it, from either region.
		for _, region := range []string{away, home} {
			code, _, e, _ := create(fed.server(region).api, tokSubmitterA, body(301))
			if code != http.StatusConflict || e.Code != apiv1.CodeConflict || e.Field != "idempotency_key" || e.Message == "" {
				t.Fatalf("another request under the key via %s: %d %+v", region, code, e)
			}
		}
		// Another tenant's key of the same name is its own.
		code, other, _, _ := create(fed.server(away).api, tokSubmitterB, body(300))
		if code != http.StatusCreated || other.Duplicate || other.ID == first.ID || other.Tenant != "team-b" {
			t.Fatalf("team-b's create under the name: %d %+v", code, other)
		}
		if got := batchRecords(t, fed) - before; got != 3 {
			t.Fatalf("%d batches stored, want 3 (team-a's, the CLI's, team-b's)", got)
		}
		if ids, err := batchMembers(fed, first.ID); err != nil || len(ids) != 2 {
			t.Fatalf("members of %s: %v %v, want 2 (the repeats stored none)", first.ID, ids, err)
		} else {
			// The member for the region that is not the batch's home was
			// handed off there.
			for _, id := range ids {
				tk, err := fed.region(first.Region).store.Get(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if want := slices.Contains(tk.Regions, first.Region); want == (tk.State == task.HandedOff) {
					t.Fatalf("member %s of home %s: state %s, regions %v", id, first.Region, tk.State, tk.Regions)
				}
			}
		}
		done := waitBatch(t, fed.server(away).api, first.ID)
		if done.Counts != (apiv1.BatchCounts{Total: 2, Succeeded: 2}) {
			t.Fatalf("batch %+v", done)
		}
		callbackRanOnce(t, fed.server(home).api, done.OnCompleteID)

		// Twins at once through servers of both regions: one creates, the
		// others answer its batch or, while it is still creating, 503 with a
		// Retry-After; never a second batch.
		key = key + "-twins"
		var many []any
		for range 1500 {
			many = append(many, map[string]any{"type": "noop", "delay": "1h", "regions": []string{away}})
		}
		twin, _ := json.Marshal(map[string]any{"idempotency_key": key, "tasks": many})
		before = batchRecords(t, fed)
		type answer struct {
			code  int
			id    string
			retry string
		}
		answers := make(chan answer, 4)
		var apis []string
		for _, name := range fed.order {
			for _, s := range fed.region(name).servers {
				apis = append(apis, s.api)
			}
		}
		for _, api := range apis {
			go func() {
				code, st, _, hdr := create(api, tokSubmitterA, twin)
				answers <- answer{code, st.ID, hdr.Get("Retry-After")}
			}()
		}
		created, ids := 0, map[string]bool{}
		for range apis {
			a := <-answers
			t.Logf("twin: %d %s retry-after %q", a.code, a.id, a.retry)
			switch {
			case a.code == http.StatusCreated:
				created++
				ids[a.id] = true
			case a.code == http.StatusOK:
				ids[a.id] = true
			case a.code == http.StatusServiceUnavailable && a.retry != "":
			default:
				t.Fatalf("a twin answered %+v", a)
			}
		}
		if created != 1 || len(ids) != 1 || batchRecords(t, fed)-before != 1 {
			t.Fatalf("twins: %d created, batches %v, %d stored", created, ids, batchRecords(t, fed)-before)
		}
		for id := range ids {
			if m, err := batchMembers(fed, id); err != nil || len(m) != 1500 {
				t.Fatalf("twins' batch %s: %d members, %v", id, len(m), err)
			}
			if code, resp := fed.call(away, tokOperatorA, http.MethodPost, "/v1/batches/"+id+"/cancel", nil); code != http.StatusOK {
				t.Fatalf("cancel: %d %s", code, resp)
			}
		}
	})

	t.Run("bad input: 4xx naming the field, nothing stored", func(t *testing.T) {
		fed := fed.on(t)
		before := batchKeys(t, fed)
		many := make([]map[string]any, apiv1.MaxBatchMembers+1)
		for i := range many {
			many[i] = map[string]any{"type": "noop"}
		}
		for _, c := range []struct {
			name  string
			body  map[string]any
			code  int
			field string
		}{
			{"no task", map[string]any{"tasks": []any{}}, 400, "tasks"},
			{"10 001 tasks", map[string]any{"tasks": many}, 400, "tasks"},
			{"on_complete invalid", map[string]any{"tasks": []any{map[string]any{"type": "noop"}}, "on_complete": map[string]any{"type": "no spaces"}}, 400, "on_complete.type"},
			{"negative unique_for", map[string]any{"tasks": []any{map[string]any{"type": "noop", "unique_key": "k", "unique_for": "-1s"}}}, 400, "tasks[0].unique_for"},
			{"a member's key", map[string]any{"tasks": []any{map[string]any{"type": "noop"}, map[string]any{"type": "noop", "idempotency_key": "k"}}}, 400, "tasks[1].idempotency_key"},
			{"a member's internal field", map[string]any{"tasks": []any{map[string]any{"type": "noop", "batch": "x"}}}, 400, "tasks[0].batch"},
			{"a payload over the limit", map[string]any{"tasks": []any{map[string]any{"type": "noop", "payload": strings.Repeat("x", 70000)}}}, 413, "tasks[0].payload"},
		} {
			code, body := fed.call(home, tokSubmitterA, http.MethodPost, "/v1/batches", c.body)
			var e struct{ Error apiv1.Error }
			if code != c.code || json.Unmarshal(body, &e) != nil || e.Error.Field != c.field || e.Error.Code == "" || e.Error.Message == "" {
				t.Errorf("%s: %d %s; want %d naming %s", c.name, code, body[:min(len(body), 300)], c.code, c.field)
			}
		}
		if after := batchKeys(t, fed); after != before {
			t.Fatalf("batch keys %d before, %d after the refusals", before, after)
		}
	})

	t.Run("cancel from the other region: every member canceled, on_complete runs once", func(t *testing.T) {
		fed := fed.on(t)
		body := map[string]any{"tasks": []any{sleep(away, 60000), sleep(away, 60000), sleep(home, 60000)},
			"on_complete": map[string]any{"type": "noop"}}
		code, resp := fed.call(home, tokSubmitterA, http.MethodPost, "/v1/batches", body)
		var st apiv1.BatchStatus
		if code != http.StatusCreated || json.Unmarshal(resp, &st) != nil {
			t.Fatalf("create: %d %s", code, resp)
		}
		if code, resp := fed.call(away, tokSubmitterA, http.MethodPost, "/v1/batches/"+st.ID+"/cancel", nil); code != http.StatusForbidden {
			t.Fatalf("a submitter's cancel: %d %s", code, resp)
		}
		if code, resp := fed.call(away, tokOperatorA, http.MethodPost, "/v1/batches/"+st.ID+"/cancel", nil); code != http.StatusOK {
			t.Fatalf("cancel: %d %s", code, resp)
		}
		done := waitBatch(t, fed.server(away).api, st.ID)
		if done.Counts != (apiv1.BatchCounts{Total: 3, Canceled: 3}) {
			t.Fatalf("batch: %+v", done)
		}
		if out := callbackRanOnce(t, fed.server(home).api, done.OnCompleteID); len(out.Canceled) != 3 {
			t.Fatalf("outcome %+v", out)
		}
	})

	t.Run("the leader of the last member's region SIGKILLed as it finishes: the callback runs once", func(t *testing.T) {
		fed := fed.on(t)
		r := fed.region(away)
		var leader, standby *proc
		for _, s := range r.servers {
			if metric(t, s.api, "ax_region_leader") > 0 {
				leader = s
			} else {
				standby = s
			}
		}
		if leader == nil || standby == nil {
			t.Fatalf("no leader and standby in %s", away)
		}
		body := map[string]any{"tasks": []any{sleep(away, 2000)}, "on_complete": map[string]any{"type": "noop"}}
		code, resp := fed.call(home, tokSubmitterA, http.MethodPost, "/v1/batches", body)
		var st apiv1.BatchStatus
		if code != http.StatusCreated || json.Unmarshal(resp, &st) != nil {
			t.Fatalf("create: %d %s", code, resp)
		}
		ids, err := batchMembers(fed, st.ID)
		if err != nil || len(ids) != 1 {
			t.Fatalf("members %v %v", ids, err)
		}
		waitUntil(t, 20*time.Second, "the member half-way", func() bool {
			tk, code := fed.getTask(home, tokSubmitterA, ids[0])
			return code == http.StatusOK && tk.Progress != nil && tk.Progress.Percent >= 50
		})
		leader.kill()
		fed.waitState(home, tokSubmitterA, ids[0], task.Success, 20*time.Second)
		done := waitBatch(t, fed.server(home).api, st.ID)
		if done.Counts != (apiv1.BatchCounts{Total: 1, Succeeded: 1}) {
			t.Fatalf("batch %+v", done)
		}
		callbackRanOnce(t, standby.api, done.OnCompleteID)
		if metric(t, standby.api, "ax_region_leader") == 0 {
			t.Fatalf("the standby of %s did not take over", away)
		}
	})
}

// batchKeys counts the keys of batches in every region's Redis.
func batchKeys(t *testing.T, fed *federation) int {
	n := 0
	for _, name := range fed.order {
		ks, err := fed.region(name).rdb.Keys(context.Background(), "ax:{batch:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		n += len(ks)
	}
	return n
}

// batchRecords counts the batches stored in every region's Redis.
func batchRecords(t *testing.T, fed *federation) int {
	n := 0
	for _, name := range fed.order {
		ks, err := fed.region(name).rdb.Keys(context.Background(), "ax:{batch:*}:b").Result()
		if err != nil {
			t.Fatal(err)
		}
		n += len(ks)
	}
	return n
}

// batchMembers reads a batch's member ids from its home region's Redis.
func batchMembers(fed *federation, id string) ([]string, error) {
	p, err := task.ParseID(id)
	if err != nil {
		return nil, err
	}
	return fed.region(p.Region).rdb.LRange(context.Background(), "ax:{batch:"+id+"}:ids", 0, -1).Result()
}

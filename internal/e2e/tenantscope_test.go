package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// idSeq is the sequence part of a task id (characters 10–15, base32hex).
func idSeq(t *testing.T, id string) int64 {
	t.Helper()
	var v int64
	for _, c := range id[10:16] {
		d := strings.IndexRune("0123456789abcdefghijklmnopqrstuv", c)
		if d < 0 {
			t.Fatalf("not an id: %s", id)
		}
		v = v<<5 | int64(d)
	}
	return v
}

// Real `ax server`s and workers (two regions, auth on): what the servers
// count and answer for one tenant is its own — its task types never push
// another's into _other (metrics, cost records), its ids say nothing of
// another's volume, and a 404 for another tenant's handed-off task is
// answered from the first record read, as a missing id is.
func TestAggregatesAreScopedPerTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: a federation")
	}
	fed := newFederation(t, fedOpts{})
	east := fed.region("us-east-1")
	later := func(typ string) map[string]any {
		return map[string]any{"type": typ, "delay": "1h", "tags": map[string]string{"class": "cpu"}, "regions": []string{"us-east-1"}}
	}

	t.Run("task types are capped per tenant in metrics", func(t *testing.T) {
		fed := fed.on(t)
		for i := range 60 {
			fed.submit("us-east-1", tokSubmitterA, later(fmt.Sprintf("a-type-%02d", i)))
		}
		fed.submit("us-east-1", tokSubmitterB, later("b-report"))
		resp, err := http.Get(east.servers[0].api + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `tenant="team-b",type="b-report"`) {
			t.Errorf("after team-a's 60 types, team-b's first type is not its own series of ax_tasks_submitted_total:\n%s",
				grepLines(string(b), "ax_tasks_submitted_total"))
		}
	})

	t.Run("cost records stay per tenant", func(t *testing.T) {
		fed := fed.on(t)
		// team-a filled today's cost hash with 5000 (type, pool, tags) rows.
		key := fmt.Sprintf("ax:{us-east-1:0}:cost:%d", time.Now().UTC().Unix()/86400)
		fields := map[string]any{}
		for i := range 5000 {
			fields[fmt.Sprintf("team-a\tflood-%d\tcpu\t", i)] = "1 0 1000 11111"
		}
		if err := east.rdb.HSet(context.Background(), key, fields).Err(); err != nil {
			t.Fatal(err)
		}
		id, _ := fed.submit("us-east-1", tokSubmitterB, map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"},
			"regions": []string{"us-east-1"}})
		fed.waitState("us-east-1", tokSubmitterB, id, task.Success, 20*time.Second)
		code, body := fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/v1/cost?group_by=tenant,type", nil)
		var rep struct {
			Rows []struct {
				Tenant string `json:"tenant"`
				Type   string `json:"type"`
				Runs   int64  `json:"runs"`
			} `json:"rows"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &rep) != nil {
			t.Fatalf("team-b's cost report: %d %s", code, body)
		}
		var runs int64
		for _, r := range rep.Rows {
			if r.Tenant == "team-b" && r.Type == "noop" {
				runs += r.Runs
			}
		}
		if runs < 1 {
			t.Fatalf("team-b's noop run is not in its own cost row with team-a's 5000 rows in the day's hash: %s", body)
		}
	})

	t.Run("ids do not count other tenants' submits", func(t *testing.T) {
		fed := fed.on(t)
		counted := 0
		var diffs []int64
		for range 5 {
			a1, _ := fed.submit("us-east-1", tokSubmitterA, later("a-probe"))
			for range 7 {
				fed.submit("us-east-1", tokSubmitterB, later("b-volume"))
			}
			a2, _ := fed.submit("us-east-1", tokSubmitterA, later("a-probe"))
			d := idSeq(t, a2) - idSeq(t, a1)
			diffs = append(diffs, d)
			if d == 8 {
				counted++
			}
		}
		if counted > 1 {
			t.Fatalf("team-a's ids around team-b's 7 submits: sequences %v apart, %d of 5 exactly 8", diffs, counted)
		}
	})

	t.Run("another tenant's handed-off task is a 404 from the first read", func(t *testing.T) {
		fed := fed.on(t)
		ho := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{"type": "noop"})
		missing := task.FormatID("us-east-1", 0, time.Now().UnixMilli(), 12345)
		p50 := func(id string) time.Duration {
			var ds []time.Duration
			for range 40 {
				start := time.Now()
				if code, body := fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/v1/tasks/"+id, nil); code != http.StatusNotFound {
					t.Fatalf("team-b's GET of %s: %d %s, want 404", id, code, body)
				}
				ds = append(ds, time.Since(start))
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			return ds[len(ds)/2]
		}
		handed, miss := p50(ho.ID), p50(missing)
		t.Logf("404 p50: another tenant's handed-off task %s, a missing id %s", handed, miss)
		// With the holder's server stopped, the answer does not wait for it:
		// nothing but this region's record is read.
		holder := fed.server("eu-west-1")
		holder.signal(syscall.SIGSTOP)
		defer holder.signal(syscall.SIGCONT)
		start := time.Now()
		code, body := fed.call("us-east-1", tokSubmitterB, http.MethodGet, "/v1/tasks/"+ho.ID, nil)
		took := time.Since(start)
		holder.signal(syscall.SIGCONT)
		if code != http.StatusNotFound || took > time.Second {
			t.Fatalf("team-b's GET of team-a's task handed to a stopped region: %d in %s (%s), want 404 at once", code, took, body)
		}
	})
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/netem"
	"github.com/ax-sched/ax/task"
)

// The hand-off figures of docs/benchmarks.md, at 0 and 80 ms between the
// regions (internal/netem links, 0.5 % loss at 80 ms): paced hand-offs
// (80 a second for 5 s) and a burst of 2 000 in two batch submits, from
// us-east-1 to the cheaper eu-west-1. A hand-off's latency is its
// acceptance at home (created_at) to its release in eu-west-1 (the
// COMMITTED step: runnable there), and to its arrival there (RECEIVED).
// It measures, it asserts nothing but that every task arrived: run it with
// AX_WAN_BENCH=1.
func TestWANHandOffFigures(t *testing.T) {
	if os.Getenv("AX_WAN_BENCH") == "" {
		t.Skip("a measurement: AX_WAN_BENCH=1 runs it")
	}
	link := netem.Link{}
	fed := newFederation(t, fedOpts{servers: 2, ownEtcd: true, wan: &link})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	spec := euCheapest(t, ctx, fed)
	for _, l := range []netem.Link{{}, wanLink} {
		fed.setLink(l)
		time.Sleep(2 * time.Second) // connections warm on the new link
		rtt := 2 * l.Delay
		ids := make([]string, 0, 400)
		for start, k := time.Now(), 0; k < 400; k++ {
			time.Sleep(time.Until(start.Add(time.Duration(k) * time.Second / 80)))
			id, _ := fed.submit("us-east-1", tokSubmitterA, spec)
			ids = append(ids, id)
		}
		recv, commit, _ := handOffLatencies(t, ctx, fed, ids)
		t.Logf("RTT %v, paced 80/s, %d hand-offs: accepted → RECEIVED %s; → COMMITTED %s", rtt, len(ids), dist(recv), dist(commit))

		began := time.Now()
		var burst []string
		for range 2 {
			specs := make([]any, 1000)
			for i := range specs {
				specs[i] = spec
			}
			code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks/batch", map[string]any{"tasks": specs})
			if code != http.StatusOK {
				t.Fatalf("batch submit: %d %s", code, body)
			}
			var out apiv1.BatchResponse
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Results {
				if r.Task != nil && r.Task.Region == "eu-west-1" {
					burst = append(burst, r.Task.ID)
				}
			}
		}
		recv, commit, last := handOffLatencies(t, ctx, fed, burst)
		t.Logf("RTT %v, burst of 2000 (%d handed off): %.0f hand-offs/s (first submit → last COMMITTED %v); accepted → RECEIVED %s; → COMMITTED %s",
			rtt, len(burst), float64(len(burst))/last.Sub(began).Seconds(), last.Sub(began).Round(time.Millisecond), dist(recv), dist(commit))
	}
}

// handOffLatencies waits until every task of ids is released in
// eu-west-1 and returns, per task, created_at → RECEIVED and → COMMITTED,
// and the last COMMITTED.
func handOffLatencies(t *testing.T, ctx context.Context, fed *federation, ids []string) (recv, commit []time.Duration, last time.Time) {
	eu := fed.region("eu-west-1")
	waitUntil(t, 2*time.Minute, "every hand-off released in eu-west-1", func() bool {
		trails, err := eu.store.Tasks().Trails(ctx, ids)
		if err != nil {
			return false
		}
		for _, id := range ids {
			if countReason(trails[id], task.ReasonCommitted) == 0 {
				return false
			}
		}
		return true
	})
	trails, err := eu.store.Tasks().Trails(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		tr := trails[id]
		var created time.Time
		if tk, err := eu.store.Get(ctx, id); err == nil {
			created = tk.CreatedAt
		}
		for _, s := range tr {
			switch s.Reason {
			case task.ReasonReceived:
				recv = append(recv, s.At.Sub(created))
			case task.ReasonCommitted:
				commit = append(commit, s.At.Sub(created))
				if s.At.After(last) {
					last = s.At
				}
			}
		}
	}
	return recv, commit, last
}

// dist is "p50 X ms, p99 Y ms" of ds.
func dist(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("p50 %.0f ms, p99 %.0f ms", ms(ds[len(ds)/2]), ms(ds[len(ds)*99/100]))
}

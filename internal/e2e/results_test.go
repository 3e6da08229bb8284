package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/task"
)

// Results and progress through real processes, auth on, two regions: a
// handed-off task's result waited for from the other region (HTTP, the Go
// client, ax get --wait); a result over the region's limit fails with
// RESULT_TOO_LARGE; a worker SIGKILLed mid-task leaves progress monotonic
// and the result stored once, by the attempt that finished.
func TestResultsAndProgressAcrossRegions(t *testing.T) {
	t.Parallel()
	const home, away = "us-east-1", "eu-west-1"
	fed := newFederation(t, fedOpts{noWorkers: true,
		worker: `exec: {allow: {big: {argv: [/usr/bin/head, "-c", "70000", /dev/zero]}}}`,
		// solo: a pool only the crash case's workers serve.
		pools: map[string]string{away: "- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}\n" +
			"- {name: solo, tags: {class: solo}, slots: 2, price_per_slot_hour: 0.04}"}})
	fed.startWorker(home, "cpu")
	fed.startWorker(away, "cpu")
	first := fed.startWorker(away, "solo", "--concurrency", "2")
	fed.waitPlaceable()
	sleep := func(ms int) map[string]any {
		return map[string]any{"type": "sleep", "payload": map[string]int{"ms": ms}, "result_ttl": "2h"}
	}

	t.Run("a handed-off task's result, waited for from the other region", func(t *testing.T) {
		fed := fed.on(t)
		h := fed.handedOffTask(home, away, tokSubmitterA, sleep(1500))
		code, body := fed.call(home, tokSubmitterA, http.MethodGet, "/v1/tasks/"+h.ID+"/result?wait=30s", nil)
		var res apiv1.TaskResult
		if code != http.StatusOK || json.Unmarshal(body, &res) != nil {
			t.Fatalf("GET result?wait=30s via %s: %d %s", home, code, body)
		}
		if !res.Done || res.State != task.Success || string(res.Result) != `"slept 1.5s"` || res.ResultExpiresAt == nil ||
			res.FinishedAt == nil || res.ResultExpiresAt.Sub(*res.FinishedAt) != 2*time.Hour || res.Progress == nil || res.Progress.Percent != 100 {
			t.Fatalf("result %s", body)
		}
		if code, body := fed.call(home, tokSubmitterB, http.MethodGet, "/v1/tasks/"+h.ID+"/result", nil); code != http.StatusNotFound {
			t.Fatalf("another tenant's wait: %d %s", code, body)
		}
		// The Go client and the CLI wait the same way, from either region.
		c, err := client.New(fed.server(away).api, client.WithToken(fed.token(tokSubmitterA)), client.WithHTTPClient(fed.http))
		if err != nil {
			t.Fatal(err)
		}
		h2 := fed.handedOffTask(home, away, tokSubmitterA, sleep(500))
		got, err := client.Wait(context.Background(), c, h2.ID, 30*time.Second)
		if err != nil || got.State != task.Success || string(got.Result) != `"slept 500ms"` {
			t.Fatalf("client.Wait: %+v %v", got, err)
		}
		h3 := fed.handedOffTask(home, away, tokSubmitterA, sleep(500))
		out, errOut, exit := runAx(t, fed.server(home).api, "--token", fed.token(tokSubmitterA), "get", h3.ID, "--wait", "30s")
		if exit != 0 || !strings.Contains(out, "SUCCESS") || !strings.Contains(out, "slept 500ms") || !strings.Contains(out, "100% slept 500ms") {
			t.Fatalf("ax get --wait: exit %d\n%s\n%s", exit, out, errOut)
		}
	})

	t.Run("a result over the limit fails the attempt with RESULT_TOO_LARGE", func(t *testing.T) {
		fed := fed.on(t)
		h := fed.handedOffTask(home, away, tokSubmitterA, map[string]any{"type": "exec", "payload": map[string]string{"command": "big"}})
		c, err := client.New(fed.server(home).api, client.WithToken(fed.token(tokSubmitterA)), client.WithHTTPClient(fed.http))
		if err != nil {
			t.Fatal(err)
		}
		res, err := client.Wait(context.Background(), c, h.ID, 30*time.Second)
		var failed *client.TaskFailedError
		if !errors.As(err, &failed) || failed.Reason != task.ReasonResultTooLarge || res.Result != nil ||
			!strings.Contains(failed.Message, "70000 bytes, over this region's limit of 65536") || res.Attempts != 1 {
			t.Fatalf("wait: %+v %v", res, err)
		}
		if tk := fed.region(away).task(t, h.ID); tk.Result != "" || tk.State != task.Failed {
			t.Fatalf("stored: %s with %d bytes of result", tk.State, len(tk.Result))
		}
	})

	t.Run("a worker SIGKILLed mid-task: progress stays monotonic, the result is stored once", func(t *testing.T) {
		fed := fed.on(t)
		spec := sleep(4000)
		spec["tags"] = map[string]string{"class": "solo"}
		h := fed.handedOffTask(home, away, tokSubmitterA, spec)
		type sample struct {
			attempt int
			percent float64
		}
		var seen []sample
		var tk task.Task
		killed := false
		waitUntil(t, 40*time.Second, "the task to succeed on the second worker", func() bool {
			var code int
			if tk, code = fed.getTask(home, tokSubmitterA, h.ID); code != http.StatusOK {
				return false
			}
			if p := tk.Progress; p != nil {
				seen = append(seen, sample{p.Attempt, p.Percent})
				if !killed && p.Attempt == 1 && p.Percent >= 20 {
					first.kill() // mid-task: its lease runs out, the reaper retries
					fed.startWorker(away, "solo", "--concurrency", "2")
					killed = true
				}
			}
			time.Sleep(100 * time.Millisecond)
			return tk.State == task.Success
		})
		if !killed {
			t.Fatalf("the task ended before its first worker was killed; progress seen %v", seen)
		}
		for i := 1; i < len(seen); i++ {
			a, b := seen[i-1], seen[i]
			if b.attempt < a.attempt || b.attempt == a.attempt && b.percent < a.percent {
				t.Fatalf("progress went back from %+v to %+v: %v", a, b, seen)
			}
		}
		if last := seen[len(seen)-1]; last.attempt != 2 || last.percent != 100 || tk.Attempts != 2 || tk.Result != "slept 4s" {
			t.Fatalf("end: progress %+v, %d attempts, result %q; seen %v", last, tk.Attempts, tk.Result, seen)
		}
		completed, lost := 0, 0
		for _, st := range fed.trail(home, tokSubmitterA, h.ID) {
			switch st.Reason {
			case task.ReasonCompleted:
				completed++
			case task.ReasonHeartbeatLost:
				lost++
			}
		}
		if completed != 1 || lost == 0 {
			t.Fatalf("trail: %d COMPLETED, %d HEARTBEAT_LOST; want 1 and at least 1", completed, lost)
		}
	})
}

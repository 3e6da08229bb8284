package e2e

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// TestMemoryReserveDefersHandOffsAndScheduleSlots: the memory reserve
// (quotas.memory_reserve, docs/security.md "Payload bytes") holds for what
// reaches a region's Redis without an API submit there. Two regions of two
// servers, auth on; eu-west-1's Redis gets a maxmemory that puts it in the
// reserve, team-a holding the most payload bytes there:
//   - a task of team-a submitted in us-east-1 and placed in eu-west-1 is
//     refused by eu-west-1 (429 memory_reserve, which the sender takes as
//     "try later"): it stays in us-east-1's outbox, nothing is stored in
//     eu-west-1; team-b's, handed off meanwhile, lands and succeeds;
//   - team-a's every-second schedule with home eu-west-1 fires no slot: its
//     passes are counted as deferred (ax_schedule_fires_total), team-b's
//     fires;
//   - once the memory is back, team-a's task is handed off and succeeds
//     there, once, and its schedule fires again.
func TestMemoryReserveDefersHandOffsAndScheduleSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: a federation")
	}
	home, full := "us-east-1", "eu-west-1"
	fed := newFederation(t, fedOpts{servers: 2, extra: "quotas:\n  memory_reserve: 0.2\n"})
	east, west := fed.region(home), fed.region(full)
	ctx := context.Background()
	var servers []*proc
	for _, r := range fed.order {
		servers = append(servers, fed.region(r).servers...)
	}
	counter := func(name string, labels map[string]string) float64 {
		total := 0.0
		for _, s := range servers {
			v, _ := sum(scrape(t, s.api+"/metrics"), name, labels)
			total += v
		}
		return total
	}

	// team-a holds the most payload bytes in eu-west-1: 20 delayed tasks
	// of 60 kB.
	for range 20 {
		fed.submit(full, tokSubmitterA, map[string]any{"type": "noop", "delay": "1h", "tags": map[string]string{"class": "cpu"},
			"regions": []string{full}, "payload": map[string]string{"pad": strings.Repeat("x", 60_000)}})
	}
	info, err := west.rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	used := infoInt(t, info, "used_memory")
	// 85 % full: past the top tenant's line (80 %), under everyone's (95 %).
	limit := used * 100 / 85
	if err := west.rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { west.rdb.ConfigSet(context.Background(), "maxmemory", "0") })
	// Each server reads the memory at most every 100 ms.
	waitUntil(t, 10*time.Second, "team-a's submits in eu-west-1 refused for the memory reserve", func() bool {
		for _, s := range west.servers {
			code, body := fed.callAPI(s.api, tokSubmitterA, http.MethodPost, "/v1/tasks", map[string]any{"type": "noop"})
			if code != http.StatusTooManyRequests || !strings.Contains(string(body), "memory_reserve") {
				return false
			}
		}
		return true
	})

	schedule := func(name, tenant string) {
		t.Helper()
		code, body := fed.call(home, tokOperator, http.MethodPost, "/v1/schedules", map[string]any{
			"name": name, "cron": "@every 1s", "home_region": full, "misfire": "skip",
			"task": map[string]any{"type": "noop", "tenant": tenant, "tags": map[string]string{"class": "cpu"}}})
		if code != http.StatusCreated {
			t.Fatalf("schedule %s: %d %s", name, code, body)
		}
	}
	schedule("a-every-second", "team-a")
	schedule("b-every-second", "team-b")

	noop := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}, "regions": []string{full}}
	aID, where := fed.submit(home, tokSubmitterA, noop)
	if where != full {
		t.Fatalf("team-a's task placed in %s, want %s", where, full)
	}
	b := fed.handedOffTask(home, full, tokSubmitterB, noop)
	fed.waitState(home, tokSubmitterB, b.ID, task.Success, 30*time.Second)

	waitUntil(t, 30*time.Second, "team-b's schedule fires and team-a's is deferred", func() bool {
		return counter("ax_schedule_fires_total", map[string]string{"schedule": "b-every-second", "outcome": "fired"}) >= 2 &&
			counter("ax_schedule_fires_total", map[string]string{"schedule": "a-every-second", "outcome": "deferred"}) >= 2
	})
	if n := counter("ax_schedule_fires_total", map[string]string{"schedule": "a-every-second", "outcome": "fired"}); n != 0 {
		t.Fatalf("team-a's schedule fired %v slots into the full region", n)
	}
	if n := counter("ax_tasks_rejected_total", map[string]string{"region": full, "reason": "memory_reserve"}); n == 0 {
		t.Fatal("eu-west-1 counted no refusal for its memory reserve")
	}
	// team-a's hand-off is still at home, and nothing of it in eu-west-1.
	if _, err := west.store.Get(ctx, aID); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("team-a's task in the full region: %v", err)
	}
	if tk, err := east.store.Get(ctx, aID); err != nil || tk.State == task.Success || tk.State == task.Failed {
		t.Fatalf("team-a's task at home: %+v %v", tk, err)
	}

	// The memory back: the hand-off lands and runs, the schedule fires.
	if err := west.rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	fed.waitState(home, tokSubmitterA, aID, task.Success, 90*time.Second)
	if tk, err := west.store.Get(ctx, aID); err != nil || tk.State != task.Success || tk.Attempts != 1 {
		t.Fatalf("team-a's task in eu-west-1: %+v %v, want SUCCESS after one attempt", tk, err)
	}
	waitUntil(t, 30*time.Second, "team-a's schedule fires again", func() bool {
		return counter("ax_schedule_fires_total", map[string]string{"schedule": "a-every-second", "outcome": "fired"}) >= 1
	})
}

// infoInt reads an integer field of a Redis INFO answer.
func infoInt(t *testing.T, info, field string) int64 {
	t.Helper()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in INFO", field)
	return 0
}

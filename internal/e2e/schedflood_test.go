package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// listTasks reads every task of tenant and type through region's API
// with token (all pages).
func (f *federation) listTasks(region, token, tenant, typ string) []task.Task {
	f.t.Helper()
	var out []task.Task
	cursor := ""
	for {
		q := url.Values{"tenant": {tenant}, "type": {typ}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		code, body := f.call(region, token, http.MethodGet, "/v1/tasks?"+q.Encode(), nil)
		var page struct {
			Tasks      []task.Task `json:"tasks"`
			NextCursor string      `json:"next_cursor"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &page) != nil {
			f.t.Fatalf("list %s tasks of %s: %d %s", typ, tenant, code, body)
		}
		out = append(out, page.Tasks...)
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// Real `ax server`s (two regions, auth on): tenant team-a's operator
// creates its max_schedules of every-second schedules (the next is 429
// quota_exceeded naming max_schedules). Tenant team-b's every-second
// schedule, created after them, still fires every slot within a second:
// its tasks' created_at (when its home region stored each) is within 1 s
// of their slot (the time part of the slot's task id), and no slot of the
// window is missing, while team-a's slots fire at its
// schedule_fires_per_second.
func TestScheduleFloodLeavesOtherTenantsSlotsOnTime(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: a federation and 500 schedules")
	}
	const flood, fires = 500, 40
	fed := newFederation(t, fedOpts{extra: fmt.Sprintf(
		"quotas:\n  tenants:\n    team-a: {max_schedules: %d, schedule_fires_per_second: %d}\n", flood, fires)})
	every := func(name, tenant, typ string) map[string]any {
		return map[string]any{"name": name, "cron": "* * * * * *", "misfire": "skip",
			"task": map[string]any{"type": typ, "tenant": tenant, "tags": map[string]string{"class": "cpu"}}}
	}
	// The flood, four at a time (creates of one tenant on one server take
	// turns; the count must hold).
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			region := "us-east-1"
			for i := next.Add(1); i <= flood; i = next.Add(1) {
				code, body := fed.call(region, tokOperatorA, http.MethodPost, "/v1/schedules",
					every(fmt.Sprintf("flood-%04d", i), "team-a", "flood-a"))
				if code != http.StatusCreated {
					t.Errorf("flood schedule %d: %d %s", i, code, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d schedules of team-a created in %s", flood, time.Since(start).Round(time.Millisecond))
	code, body := fed.call("us-east-1", tokOperatorA, http.MethodPost, "/v1/schedules", every("one-more", "team-a", "flood-a"))
	if e := apiErr(t, body); code != http.StatusTooManyRequests || e.Code != "quota_exceeded" || e.Field != "max_schedules" {
		t.Fatalf("team-a's schedule beyond its max_schedules: %d %s, want 429 quota_exceeded naming max_schedules", code, body)
	}

	code, body = fed.call("us-east-1", tokOperator, http.MethodPost, "/v1/schedules", every("tick", "team-b", "tick-b"))
	if code != http.StatusCreated {
		t.Fatalf("team-b's schedule: %d %s", code, body)
	}
	window := 8 * time.Second
	from := time.Now()
	var ticks []task.Task
	waitUntil(t, window+5*time.Second, "team-b's schedule to fire 8 slots", func() bool {
		ticks = fed.listTasks("us-east-1", tokOperator, "team-b", "tick-b")
		return len(ticks) >= 8 && time.Since(from) >= window
	})
	// A slot's task id carries the slot (its time part): the server's
	// record of which slot each task is for.
	slot := func(tk task.Task) time.Time {
		p, err := task.ParseID(tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		return p.Time
	}
	sort.Slice(ticks, func(i, j int) bool { return slot(ticks[i]).Before(slot(ticks[j])) })
	var worst time.Duration
	for i, tk := range ticks {
		late := tk.CreatedAt.Sub(slot(tk))
		worst = max(worst, late)
		if late > time.Second {
			t.Errorf("team-b's slot %s was stored %s after it", slot(tk).Format(time.StampMilli), late)
		}
		if i > 0 && slot(tk).Sub(slot(ticks[i-1])) != time.Second {
			t.Errorf("team-b's slots %s and %s: the slots between were not fired", slot(ticks[i-1]).Format(time.StampMilli), slot(tk).Format(time.StampMilli))
		}
	}
	floodTasks := fed.listTasks("us-east-1", tokOperator, "team-a", "flood-a")
	elapsed := time.Since(from)
	t.Logf("team-b: %d slots, latest stored %s after its slot; team-a: %d slots fired in %s (%d schedules, %d fires/s allowed)",
		len(ticks), worst.Round(time.Millisecond), len(floodTasks), time.Since(start).Round(time.Second), flood, fires)
	if len(floodTasks) == 0 {
		t.Fatal("team-a's schedules never fired: the flood did not run")
	}
	// From the first create on, at most fires a second (plus one second's
	// burst): team-a's schedules fire within its limit.
	if limit := int((time.Since(start) + time.Second).Seconds() * fires); len(floodTasks) > limit {
		t.Errorf("team-a fired %d slots in %s: more than its %d a second", len(floodTasks), elapsed, fires)
	}
}

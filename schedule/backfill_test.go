package schedule

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
)

// A backfill of 8 periods of an hourly schedule with max_active 3: never
// more than 3 of its tasks unfinished at once, every period started once,
// oldest first, with its period in the payload, though the federation
// leader is killed midway; bad requests are 400 naming the field; a rerun
// runs a period again under a new id.
func TestScheduleBackfill(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	f := newFed(t)
	const name, typ = "hourly", "sched.backfill"
	first := f.scheduler(gcp, "sched-gcp", nil).Start(t)
	fedtest.Eventually(t, 10*time.Second, "gcp leads", first.s.Leading)
	second := f.scheduler(az, "sched-az", nil)
	f.createSchedule(gcp, tokOperator, spec{"name": name, "cron": "0 0 * * * *", "home_region": aws,
		"task": spec{"type": typ, "regions": []string{aws}, "payload": spec{"from": "{{period_start}}", "day": "{{period_date}}"}}}).Want(t, http.StatusCreated)
	url := f.R(gcp).URL() + "/v1/schedules/" + name

	for _, c := range []struct {
		body  spec
		field string
	}{
		{spec{"from": "2026-03-02", "to": "2026-03-01"}, "from"},
		{spec{"from": "2026-01-01", "to": "2026-03-01"}, "to"}, // 1 417 periods > 1 000
		{spec{"from": "2026-03-01", "to": "2026-03-01T05:00:00Z", "max_active": 0.5}, "max_active"},
		{spec{"from": "2026-03-01T00:10:00Z", "to": "2026-03-01T00:20:00Z"}, "to"},
	} {
		rep := f.Call(http.MethodPost, url+"/backfill", tokOperator, c.body)
		var e struct{ Error apiv1.Error }
		_ = json.Unmarshal(rep.Body, &e)
		if rep.Status != http.StatusBadRequest || e.Error.Field != c.field {
			t.Errorf("backfill %v: %d %s, want 400 naming %s", c.body, rep.Status, rep.Body, c.field)
		}
	}
	f.Call(http.MethodPost, f.R(gcp).URL()+"/v1/schedules/nosuch/backfill", tokOperator, spec{"from": "2026-03-01", "to": "2026-03-02"}).Want(t, http.StatusNotFound)

	rep := f.Call(http.MethodPost, url+"/backfill", tokOperator, spec{"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T07:00:00Z", "max_active": 3}).Want(t, http.StatusCreated)
	var bf apiv1.Backfill
	if err := json.Unmarshal(rep.Body, &bf); err != nil || bf.Periods != 8 || bf.State != apiv1.BackfillRunning {
		t.Fatalf("backfill: %s (%v)", rep.Body, err)
	}
	// Finish the backfill's tasks by cancelling them, a few at a time; the
	// leader is killed once 3 periods have started.
	ctx := fedtest.Ctx(t)
	crashed := false
	maxActive := 0
	fedtest.Eventually(t, 40*time.Second, "the backfill done", func() bool {
		var list apiv1.BackfillList
		if err := json.Unmarshal(f.Call(http.MethodGet, url+"/backfills", tokOperator, nil).Want(t, http.StatusOK).Body, &list); err != nil || len(list.Backfills) != 1 {
			t.Fatalf("backfills: %v %+v", err, list)
		}
		bf = list.Backfills[0]
		// Unfinished as the leader reads it (a cancelled task may linger in
		// the waiting index a moment after it ended).
		unfinished := 0
		for _, r := range bf.Runs {
			if tk, err := f.R(aws).Store.Tasks().Get(ctx, r.ID); err != nil || !tk.State.Terminal() {
				unfinished++
			}
		}
		maxActive = max(maxActive, unfinished)
		waiting := f.waitingTasks(aws, typ)
		if len(bf.Runs) >= 3 && !crashed {
			// The API of gcp's server reads through the crashed scheduler's
			// etcd client: read az's from now on.
			crashed = true
			first.Crash()
			second.Start(t)
			url = f.R(az).URL() + "/v1/schedules/" + name
		}
		for _, tk := range waiting[:min(len(waiting), 1)] {
			if err := f.R(aws).Node().CancelTask(ctx, tk.ID, "test"); err != nil {
				t.Fatal(err)
			}
		}
		return bf.State == apiv1.BackfillDone
	})
	if maxActive > 3 {
		t.Errorf("%d of the backfill's tasks unfinished at once, want at most 3", maxActive)
	}
	if len(bf.Runs) != 8 {
		t.Fatalf("%d periods started, want 8: %+v", len(bf.Runs), bf.Runs)
	}
	ids := map[string]bool{}
	for i, r := range bf.Runs {
		want := time.Date(2026, 3, 1, i, 0, 0, 0, time.UTC)
		if !r.Period.Start.Equal(want) || !r.Period.End.Equal(want.Add(time.Hour)) || r.Outcome != OutcomeFired {
			t.Errorf("run %d: %+v, want the period from %v fired", i, r, want)
		}
		if ids[r.ID] || r.ID != f.slotID("default", name, want, aws) {
			t.Errorf("run %d: id %s twice or not its slot's", i, r.ID)
		}
		ids[r.ID] = true
		tk, reply := f.GetTask(aws, tokOperator, r.ID)
		if reply.Status != http.StatusOK || !strings.Contains(string(tk.Spec().Payload), `"from":"`+want.Format(time.RFC3339)+`"`) ||
			!strings.Contains(string(tk.Spec().Payload), `"day":"2026-03-01"`) {
			t.Errorf("task of period %v: %d %s", want, reply.Status, tk.Spec().Payload)
		}
	}

	// A rerun of the third period: a new task, under a new id.
	f.Call(http.MethodPost, url+"/rerun", tokOperator, spec{"period": "2026-03-01T00:30:00Z"}).Want(t, http.StatusBadRequest)
	rep = f.Call(http.MethodPost, url+"/rerun", tokOperator, spec{"period": "2026-03-01T02:00:00Z"}).Want(t, http.StatusCreated)
	var rr apiv1.Backfill
	_ = json.Unmarshal(rep.Body, &rr)
	fedtest.Eventually(t, 20*time.Second, "the rerun's task", func() bool {
		var list apiv1.BackfillList
		_ = json.Unmarshal(f.Call(http.MethodGet, url+"/backfills", tokOperator, nil).Body, &list)
		return len(list.Backfills) == 2 && list.Backfills[0].ID == rr.ID && len(list.Backfills[0].Runs) == 1 &&
			list.Backfills[0].Runs[0].Outcome == OutcomeFired && !ids[list.Backfills[0].Runs[0].ID]
	})
}

package schedule

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/schedule/slots"
	"github.com/ax-sched/ax/task"
)

// A downstream schedule's periods rerun with an upstream period are those
// that start within it (the runs whose same_period gates name it): the
// same period, the hours of a day, the days of a week, and a day only for
// the hour it starts in.
func TestRerunStartingIn(t *testing.T) {
	clock := func(cron string) slots.Clock {
		c, err := slots.Compile(cron, "UTC")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	at := func(d, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	hour := apiv1.Period{Start: at(2, 5), End: at(2, 6)}
	day := apiv1.Period{Start: at(2, 0), End: at(3, 0)}
	week := apiv1.Period{Start: at(2, 1), End: at(9, 1)} // Monday 01:00 to Monday 01:00
	for _, c := range []struct {
		name  string
		cron  string
		ups   []apiv1.Period
		limit int
		want  []time.Time
	}{
		{"same period", "0 0 * * * *", []apiv1.Period{hour}, 100, []time.Time{at(2, 5)}},
		{"not the day of a later hour", "0 0 0 * * *", []apiv1.Period{hour}, 100, nil},
		{"the day of its first hour", "0 0 0 * * *", []apiv1.Period{{Start: at(2, 0), End: at(2, 1)}}, 100, []time.Time{at(2, 0)}},
		{"the hours of a day", "0 0 */6 * * *", []apiv1.Period{day}, 100, []time.Time{at(2, 0), at(2, 6), at(2, 12), at(2, 18)}},
		{"the nights of a week", "0 0 2 * * *", []apiv1.Period{week}, 100, []time.Time{at(2, 2), at(3, 2), at(4, 2), at(5, 2), at(6, 2), at(7, 2), at(8, 2)}},
		{"the hull of two hours", "0 0 * * * *", []apiv1.Period{{Start: at(2, 2), End: at(2, 3)}, hour}, 100, []time.Time{at(2, 2), at(2, 3), at(2, 4), at(2, 5)}},
		{"an empty last period", "0 0 * * * *", []apiv1.Period{{Start: at(2, 5), End: at(2, 5)}}, 100, []time.Time{at(2, 5)}},
		{"at most limit", "0 0 * * * *", []apiv1.Period{day}, 3, []time.Time{at(2, 0), at(2, 1), at(2, 2)}},
	} {
		if got := startingIn(clock(c.cron), c.ups, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A rerun with downstream reruns the dependants, transitively and in
// dependency order, in one write: each downstream rerun names the upstream
// reruns' runs it waits for, and its run's gate on a schedule rerun with it
// waits for exactly that run (not the period's first run, nor any other
// success); a schedule depending on none of them is left alone; a cycle
// written around Create's check is a 409 naming the path.
func TestScheduleRerunDownstream(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	f := newDAGFed(t)
	f.sched.Start(t)
	fedtest.Eventually(t, 10*time.Second, "gcp leads", f.sched.s.Leading)
	const hourly = "0 0 * * * *"
	one := func(name string, deps ...spec) spec {
		nd := spec{"id": "n", "task": spec{"type": "sched.down"}}
		if len(deps) > 0 {
			nd["depends_on_schedules"] = deps
		}
		return spec{"name": name, "nodes": []spec{nd}}
	}
	on := func(up, rule string) spec { return spec{"schedule": up, "rule": rule} }
	for _, s := range []spec{
		{"name": "up", "cron": hourly, "paused": true, "home_region": aws, "dag": one("up")},
		{"name": "mid", "cron": hourly, "paused": true, "home_region": az, "dag": one("mid", on("up", task.GateSamePeriod))},
		{"name": "daily", "cron": "0 0 0 * * *", "paused": true, "home_region": aws, "dag": one("daily", on("mid", task.GateLatestSuccess), on("up", task.GateSamePeriod))},
		{"name": "alone", "cron": hourly, "paused": true, "home_region": aws, "dag": one("alone")},
	} {
		f.createSchedule(gcp, tokOperator, s).Want(t, http.StatusCreated)
	}
	url := f.R(gcp).URL() + "/v1/schedules/"
	// The day's first hour: daily's run of the day starts within it.
	slot := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	// A plain rerun first: the downstream one is the period's second.
	f.Call(http.MethodPost, url+"up/rerun", tokOperator, spec{"period": slot}).Want(t, http.StatusCreated)
	var root apiv1.Backfill
	if err := json.Unmarshal(f.Call(http.MethodPost, url+"up/rerun", tokOperator, spec{"period": slot, "downstream": true}).Want(t, http.StatusCreated).Body, &root); err != nil {
		t.Fatal(err)
	}
	if got := []string{root.Downstream[0].Schedule, root.Downstream[1].Schedule}; len(root.Downstream) != 2 || !slices.Equal(got, []string{"mid", "daily"}) {
		t.Fatalf("downstream %+v, want mid then daily", root.Downstream)
	}
	upRun := taskID(f.sched.s.mustIDSeq(t, "up"), slot.Add(2*time.Millisecond), aws)
	midRun := taskID(f.sched.s.mustIDSeq(t, "mid"), slot.Add(time.Millisecond), az)
	listed := func(name, id string) apiv1.Backfill {
		var list apiv1.BackfillList
		if err := json.Unmarshal(f.Call(http.MethodGet, url+name+"/backfills", tokOperator, nil).Want(t, http.StatusOK).Body, &list); err != nil {
			t.Fatal(err)
		}
		for _, bf := range list.Backfills {
			if bf.ID == id {
				return bf
			}
		}
		t.Fatalf("%s: no rerun %s in %+v", name, id, list)
		return apiv1.Backfill{}
	}
	mid, daily := listed("mid", root.Downstream[0].ID), listed("daily", root.Downstream[1].ID)
	if w := mid.WaitsFor; len(w) != 1 || w[0].Schedule != "up" || w[0].Rerun != root.ID || w[0].RunID != upRun || !w[0].DAG || !w[0].Period.Start.Equal(slot) {
		t.Errorf("mid waits for %+v, want up's rerun %s run %s", w, root.ID, upRun)
	}
	if !mid.Rerun || mid.Periods != 1 || !mid.From.Equal(slot) {
		t.Errorf("mid's rerun: %+v, want the one period %v", mid, slot)
	}
	day := slot.Truncate(24 * time.Hour)
	if daily.Periods != 1 || !daily.From.Equal(day) || len(daily.WaitsFor) != 2 {
		t.Errorf("daily's rerun: %d periods from %v waiting for %+v, want its day waiting for mid's and up's reruns", daily.Periods, daily.From, daily.WaitsFor)
	}
	var list apiv1.BackfillList
	_ = json.Unmarshal(f.Call(http.MethodGet, url+"alone/backfills", tokOperator, nil).Body, &list)
	if len(list.Backfills) != 0 {
		t.Errorf("alone, depending on nothing, was rerun: %+v", list.Backfills)
	}

	// The runs: mid's run in az, gated on exactly up's rerun run.
	var runs []*apiv1.DAGStatus
	fedtest.Eventually(t, 15*time.Second, "mid's and daily's reruns started", func() bool {
		runs = append(f.scheduledRuns(az, "mid"), f.scheduledRuns(aws, "daily")...)
		return len(runs) == 2
	})
	for _, run := range runs {
		gs := run.Nodes[0].Gates
		t.Logf("%s run %s gates %+v", run.Schedule, run.ID, gs)
		want := map[string]string{"up": upRun}
		if run.Schedule == "daily" {
			want["mid"] = midRun
		}
		if len(gs) != len(want) {
			t.Errorf("%s's run: gates %+v, want one per upstream", run.Schedule, gs)
		}
		for _, g := range gs {
			if !g.Exact || g.RunID != want[g.Schedule] || g.Deadline.IsZero() {
				t.Errorf("%s's run: gate %+v, want exact on %s", run.Schedule, g, want[g.Schedule])
			}
		}
		if run.Nodes[0].State != task.NodeWaiting {
			t.Errorf("%s's run: node %s, want WAITING for its upstream's rerun", run.Schedule, run.Nodes[0].State)
		}
	}
	if bf := listed("mid", mid.ID); len(bf.Runs) != 1 || !slices.Equal(bf.Runs[0].WaitsFor, []string{upRun}) || bf.Runs[0].ID != midRun {
		t.Errorf("mid's rerun runs %+v, want %s waiting for %s", bf.Runs, midRun, upRun)
	}

	// A cycle written around Create's check: refused, nothing stored.
	up := f.fed.sched("up")
	if _, err := f.schedStore().Update(context.Background(), up, func(d *apiv1.Schedule) {
		d.DAG.Nodes[0].DependsOnSchedules = []apiv1.ScheduleDependency{{Schedule: "daily", Rule: task.GateSamePeriod}}
	}); err != nil {
		t.Fatal(err)
	}
	rep := f.Call(http.MethodPost, url+"mid/rerun", tokOperator, spec{"period": slot, "downstream": true})
	var e struct{ Error apiv1.Error }
	_ = json.Unmarshal(rep.Body, &e)
	if rep.Status != http.StatusConflict || e.Error.Field != "downstream" || !strings.Contains(e.Error.Message, "cycle: mid -> up -> daily -> mid") {
		t.Errorf("rerun along a cycle: %d %s, want 409 naming downstream and the path", rep.Status, rep.Body)
	}
	_ = json.Unmarshal(f.Call(http.MethodGet, url+"mid/backfills", tokOperator, nil).Body, &list)
	if len(list.Backfills) != 1 {
		t.Errorf("the refused rerun left %d reruns of mid, want 1", len(list.Backfills))
	}
}

// mustIDSeq is the id sequence of the default tenant's schedule name.
func (s *Scheduler) mustIDSeq(t *testing.T, name string) uint64 {
	t.Helper()
	sd, err := s.store.Get(context.Background(), "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return sd.IDSeq()
}

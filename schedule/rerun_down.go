package schedule

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/schedule/backfill"
	"github.com/ax-sched/ax/schedule/depend"
	"github.com/ax-sched/ax/schedule/slots"
	"github.com/ax-sched/ax/task"
)

// Downstream reruns (apiv1.RerunRequest.Downstream). A rerun of a period
// of one schedule also reruns, in the same etcd transaction, the schedules
// of its tenant that depend on it, directly or through others
// (depend.Downstream, which refuses a cycle naming its path): each gets a
// rerun of its periods that start within a period rerun upstream of it
// (the runs whose same_period gates name that period), over the hull of
// those periods. A downstream rerun records the upstream reruns' runs it
// waits for (apiv1.Backfill.WaitsFor, run ids derived from the upstream's
// rerun number as its own are), and each of its runs gets, for a
// dependency on such a schedule, an Exact gate on the upstream rerun's run
// whose period holds the run's start (exactGates): it opens on that run's
// success, never on an earlier success of the period, whatever the
// dependency's rule, and waits at most the dependency's timeout (a
// latest_success dependency: depend.DefaultTimeout).

// maxRerunSchedules bounds the schedules of one downstream rerun: its
// records are written in one etcd transaction (two compares each, within
// etcd's default 128 operations).
const maxRerunSchedules = 50

// rerunPart is one schedule's rerun within a downstream rerun.
type rerunPart struct {
	e     *entry
	slots []time.Time // its periods rerun, oldest first
	rec   *bfRecord
}

// periods are the part's rerun periods.
func (p *rerunPart) periods() []apiv1.Period {
	out := make([]apiv1.Period, len(p.slots))
	for i, s := range p.slots {
		out[i] = p.e.periodOf(s)
	}
	return out
}

// rerunDownstream plans and stores the rerun of root's period slot and
// of its dependants' periods starting within it, by by; it returns root's.
func (s *Scheduler) rerunDownstream(ctx context.Context, root stored, comp slots.Clock, slot time.Time, by string) (*apiv1.Backfill, error) {
	all, _, err := s.store.List(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	byName := map[string]stored{}
	for _, sd := range all {
		if sd.Tenant() == root.Tenant() {
			byName[sd.Def.Name] = sd
		}
	}
	order, err := depend.Downstream(root.Def.Name, tenantDefs(all, root.Tenant()))
	if err != nil {
		return nil, err
	}
	parts := []*rerunPart{{e: &entry{stored: root, comp: comp}, slots: []time.Time{slot}}}
	byPart := map[string]*rerunPart{root.Def.Name: parts[0]}
	total := 1
	limit := s.limits(root.Tenant()).MaxBackfillPeriods
	for _, name := range order {
		sd := byName[name]
		c, err := slots.Compile(sd.Def.Cron, sd.Def.Timezone)
		if err != nil {
			continue // the leader ignores it too
		}
		p := &rerunPart{e: &entry{stored: sd, comp: c}}
		var ups []apiv1.Period
		for _, up := range depend.Upstreams(sd.Def) {
			if u := byPart[up]; u != nil {
				ups = append(ups, u.periods()...)
			}
		}
		if p.slots = startingIn(c, ups, limit-total+1); len(p.slots) == 0 {
			continue
		}
		if total += len(p.slots); total > limit {
			return nil, fieldError("downstream", fmt.Sprintf("the rerun and its dependants' reruns hold more than %d periods, this tenant's max_backfill_periods", limit))
		}
		parts, byPart[name] = append(parts, p), p
		if len(parts) > maxRerunSchedules {
			return nil, fieldError("downstream", fmt.Sprintf("more than %d schedules depend on %s: rerun them in parts", maxRerunSchedules-1, root.Def.Name))
		}
	}
	for _, p := range parts {
		first, last := p.slots[0], p.slots[len(p.slots)-1]
		attempt, err := s.nextAttempt(ctx, p.e.stored, first, last)
		if err != nil {
			return nil, err
		}
		p.rec = &bfRecord{Backfill: apiv1.Backfill{From: first, To: last, MaxActive: min(len(p.slots), backfill.MaxActiveLimit),
			Periods: len(p.slots), Rerun: true}, Attempt: attempt}
		p.rec.Next = &first
	}
	for _, p := range parts[1:] {
		p.rec.WaitsFor = waitsOf(p, byPart)
	}
	return s.createBackfills(ctx, parts, by)
}

// startingIn lists the slots of c within one of ups (each a period of an
// upstream), over their hull, at most limit of them.
func startingIn(c slots.Clock, ups []apiv1.Period, limit int) []time.Time {
	var first, last time.Time
	for _, u := range ups {
		end := u.End
		if !end.After(u.Start) {
			end = u.Start.Add(time.Nanosecond) // an empty period holds its start
		}
		for _, s := range c.Between(u.Start.Add(-time.Nanosecond), end.Add(-time.Nanosecond), limit) {
			if first.IsZero() || s.Before(first) {
				first = s
			}
			if s.After(last) {
				last = s
			}
		}
	}
	if first.IsZero() {
		return nil
	}
	return c.Between(first.Add(-time.Nanosecond), last, limit)
}

// waitsOf lists the runs of p's upstreams' reruns (byPart) whose periods
// hold the start of one of p's periods.
func waitsOf(p *rerunPart, byPart map[string]*rerunPart) []apiv1.RerunWait {
	var out []apiv1.RerunWait
	for _, up := range depend.Upstreams(p.e.Def) {
		u := byPart[up]
		if u == nil {
			continue
		}
		for i, per := range u.periods() {
			if slices.ContainsFunc(p.slots, func(s time.Time) bool { return holds(per, s) }) {
				slot := u.slots[i].Add(time.Duration(u.rec.Attempt) * time.Millisecond)
				out = append(out, apiv1.RerunWait{Schedule: up, Period: per, DAG: runsDAG(u.e.Def),
					RunID: taskID(u.e.IDSeq(), slot, u.e.Def.HomeRegion)})
			}
		}
	}
	return out
}

// holds reports whether period p holds the instant t (an empty period
// holds its start).
func holds(p apiv1.Period, t time.Time) bool {
	return t.Equal(p.Start) || !t.Before(p.Start) && t.Before(p.End)
}

// waitingIn is the waits of a downstream rerun whose periods hold p's
// start.
func waitingIn(waits []apiv1.RerunWait, p apiv1.Period) []apiv1.RerunWait {
	var out []apiv1.RerunWait
	for _, w := range waits {
		if holds(w.Period, p.Start) {
			out = append(out, w)
		}
	}
	return out
}

// exactGates are the gates of dependency dep of a downstream rerun's run
// of period p, started now, on its upstream's rerun runs (waits); none
// when that upstream is not rerun with it.
func exactGates(dep apiv1.ScheduleDependency, waits []apiv1.RerunWait, p apiv1.Period, now time.Time) []task.Gate {
	timeout := time.Duration(dep.Timeout)
	if timeout == 0 {
		timeout = depend.DefaultTimeout
	}
	var out []task.Gate
	for _, w := range waitingIn(waits, p) {
		if w.Schedule == dep.Schedule {
			start := w.Period.Start
			out = append(out, task.Gate{Schedule: dep.Schedule, Rule: dep.Rule, OnTimeout: dep.OnTimeout, RunID: w.RunID,
				DAG: w.DAG, Period: &start, Exact: true, Deadline: now.Add(timeout)})
		}
	}
	return out
}

// runIDs are the run ids of waits.
func runIDs(waits []apiv1.RerunWait) []string {
	out := make([]string, 0, len(waits))
	for _, w := range waits {
		if !slices.Contains(out, w.RunID) {
			out = append(out, w.RunID)
		}
	}
	return out
}

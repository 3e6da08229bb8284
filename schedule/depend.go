package schedule

import (
	"context"
	"slices"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Dependencies between schedules: a node of a schedule's DAG may depend on
// another schedule of its tenant (apiv1.ScheduleDependency). Create refuses
// a dependency on a schedule the tenant does not have, and a cycle, with
// its path. When the leader starts a run it resolves each dependency into a
// task.Gate the run's home region opens (package dag): same_period names
// the upstream's run whose period covers this run's period start (derived
// id: no read), latest_success looks for the upstream's newest successful
// run among its latestSuccessSlots latest periods (a period's reruns
// count, newest first), and marks the gate stale when none ended within
// max_age. The home region counts a same_period upstream's reruns too
// (dag.Upstreams.Reruns, ends.go).

// Dependency bounds.
const (
	// latestSuccessSlots is how many of the upstream's latest periods
	// latest_success looks at, newest first.
	latestSuccessSlots = 8
	// coverLookback bounds how far back same_period looks for the
	// upstream's slot (a yearly schedule's covers a year).
	coverLookback = 400 * 24 * time.Hour
)

// gates resolves the dependencies of e's DAG nodes for its run of period
// p, started now: by node id. lookup finds a schedule of e's tenant in
// this term (nil: gone; its gates are stale). waits are a downstream
// rerun's (nil for a slot or a backfill): a dependency on a schedule
// rerun with it gets exact gates on that rerun's runs (exactGates).
func (s *Scheduler) gates(ctx context.Context, e *entry, p apiv1.Period, waits []apiv1.RerunWait, lookup func(name string) *entry) (map[string][]task.Gate, error) {
	var out map[string][]task.Gate
	now := s.now().UTC()
	dr, err := dagOf(e.Def)
	if err != nil {
		return nil, err
	}
	for _, nd := range dr.Nodes {
		for _, dep := range nd.DependsOnSchedules {
			if exact := exactGates(dep, waits, p, now); len(exact) > 0 {
				if out == nil {
					out = map[string][]task.Gate{}
				}
				out[nd.ID] = append(out[nd.ID], exact...)
				continue
			}
			g := task.Gate{Schedule: dep.Schedule, Rule: dep.Rule, OnTimeout: dep.OnTimeout}
			u := lookup(dep.Schedule)
			switch {
			case u == nil:
				g.Stale = true
			case dep.Rule == task.GateSamePeriod:
				g.Deadline = now.Add(time.Duration(dep.Timeout))
				g.DAG = runsDAG(u.Def)
				if slot, ok := u.comp.NewestBefore(p.Start.Add(-coverLookback), p.Start.Add(time.Nanosecond)); ok {
					g.RunID, g.Period = u.runID(slot), &slot
				}
			default:
				if err := s.latestSuccess(ctx, u, &g, now, time.Duration(dep.MaxAge)); err != nil {
					return nil, err
				}
			}
			if out == nil {
				out = map[string][]task.Gate{}
			}
			out[nd.ID] = append(out[nd.ID], g)
		}
	}
	return out, nil
}

// latestSuccess points g at u's newest successful run among its latest
// periods, or marks it stale when none ended within maxAge (0: any age).
func (s *Scheduler) latestSuccess(ctx context.Context, u *entry, g *task.Gate, now time.Time, maxAge time.Duration) error {
	g.DAG = runsDAG(u.Def)
	slots := u.comp.Latest(now.Add(-coverLookback), now.Add(time.Nanosecond), latestSuccessSlots)
	reruns, err := s.startedRuns(ctx, u.stored, true)
	if err != nil {
		return unavailable(err)
	}
	for _, slot := range slices.Backward(slots) {
		// The period's newest success counts: its reruns', then its own.
		ids := []string{u.runID(slot)}
		for _, r := range reruns {
			if r.Period.Start.Equal(slot) {
				ids = append(ids, r.ID)
			}
		}
		for _, id := range slices.Backward(ids) {
			ok, finished, err := s.succeeded(ctx, u, id)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			g.Period = &slot
			if maxAge > 0 && (finished == nil || now.Sub(*finished) > maxAge) {
				g.Stale = true
				return nil
			}
			g.RunID = id
			return nil
		}
	}
	g.Stale = true
	return nil
}

// succeeded reports whether u's run id ended SUCCESS, and when.
func (s *Scheduler) succeeded(ctx context.Context, u *entry, id string) (bool, *time.Time, error) {
	if s.cfg.DAGs == nil {
		return false, nil, errNoDAGs
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if !runsDAG(u.Def) {
		st, finished, ok, err := s.cfg.DAGs.TaskState(cctx, id)
		return ok && st == task.Success, finished, err
	}
	st, finished, ok, err := s.cfg.DAGs.RunState(cctx, id)
	return ok && st == task.DAGSuccess, finished, err
}

package schedule

import (
	"context"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/schedule/grid"
	"github.com/ax-sched/ax/schedule/slots"
)

// Grid is tenant's schedule name's latest periods × its nodes (package
// grid): the newest periods among its slots since its creation up to now
// and the periods its backfills and reruns started, at most periods of them, each
// with its newest run's node states. A run no region knows (not started,
// or expired) leaves its column empty; one that cannot be read now is 503.
func (s *Scheduler) Grid(ctx context.Context, name, tenant string, periods int) (*apiv1.ScheduleGrid, error) {
	if periods < 1 || periods > apiv1.GridPeriodsMax {
		return nil, fieldError("periods", "from 1 to 50")
	}
	if s.cfg.DAGs == nil {
		return nil, errNoDAGs
	}
	sd, err := s.find(ctx, name, tenant)
	if err != nil {
		return nil, err
	}
	comp, err := slots.Compile(sd.Def.Cron, sd.Def.Timezone)
	if err != nil {
		return nil, err
	}
	e := &entry{stored: sd, comp: comp}
	dr, err := dagOf(sd.Def)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ScheduleGrid{Schedule: sd.Def.Name, Nodes: make([]string, len(dr.Nodes))}
	for i, nd := range dr.Nodes {
		out.Nodes[i] = nd.ID
	}
	started, err := s.startedRuns(ctx, sd, false)
	if err != nil {
		return nil, unavailable(err)
	}
	// The slots start after the schedule's creation, as its first fire:
	// earlier periods are columns only when backfills or reruns ran them.
	now := s.now()
	after := now.Add(-coverLookback)
	if sd.Def.CreatedAt.After(after) {
		after = sd.Def.CreatedAt
	}
	cols := grid.Columns(comp.Latest(after, now.Add(time.Nanosecond), periods), e.runID, started, periods)
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if out.Periods, err = grid.Periods(cctx, s.cfg.DAGs, runsDAG(sd.Def), out.Nodes, cols, e.periodOf); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

package schedule

import (
	"context"
	"errors"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// The federation leader's side of backfills: at most every backfillEvery
// it reads the running backfills, forgets the active runs that ended, and
// starts the next periods, oldest first, until max_active run at once.
// Each period is started first and recorded second, under the derived id
// of (schedule, slot, attempt): a leader that dies in between makes its
// successor start the same id, which the home region refuses, so no period
// runs twice and none is lost. A started period takes a fire from its
// tenant's schedule_fires_per_second, as a slot does.

// backfillEvery bounds how often the leader reads the backfills and asks
// after their active runs.
const backfillEvery = 500 * time.Millisecond

// stepBackfills advances every running backfill once. It returns
// errNotLeader when the term ended.
func (s *Scheduler) stepBackfills(ctx context.Context, t *term) error {
	if !t.backfillAt.IsZero() && time.Since(t.backfillAt) < backfillEvery {
		return nil
	}
	t.backfillAt = time.Now()
	all, err := s.store.BackfillsOf(ctx, "")
	if err != nil {
		s.log.Warn("schedules: cannot read backfills", "err", err)
		return nil
	}
	for _, bs := range all {
		if bs.Rec.State != apiv1.BackfillRunning {
			continue
		}
		e := t.entries[s.store.DefKeyOf(bs.Key)]
		if e == nil || e.Rev != bs.Rec.DefRev {
			continue // its schedule is gone or was created again
		}
		err := s.stepBackfill(ctx, t, e, bs)
		switch {
		case errors.Is(err, errNotLeader):
			return err
		case errors.Is(err, errGone):
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			s.log.Warn("schedule backfill: not advanced; retrying", "schedule", e.Def.Name, "tenant", e.Tenant(), "backfill", bs.Rec.ID, "err", err)
		}
	}
	return nil
}

// stepBackfill forgets bs's active runs that ended and starts its next
// periods while fewer than max_active run, recording after each start.
func (s *Scheduler) stepBackfill(ctx context.Context, t *term, e *entry, bs bfStored) error {
	rec := bs.Rec
	active := rec.Active[:0:0]
	for _, id := range rec.Active {
		busy, err := s.unfinished(ctx, e, id)
		if err != nil {
			return err
		}
		if busy {
			active = append(active, id)
		}
	}
	changed := len(active) != len(rec.Active)
	rec.Active = active
	b := t.bucket(e.Tenant())
	lim := s.limits(e.Tenant())
	for rec.Next != nil && len(rec.Active) < rec.MaxActive {
		if b.refill(time.Now(), lim) < 1 {
			break
		}
		slot := *rec.Next
		id := taskID(e.IDSeq(), slot.Add(time.Duration(rec.Attempt)*time.Millisecond), e.Def.HomeRegion)
		created, refused, err := s.start(ctx, t, e, slot, id, slot, rec.WaitsFor)
		if err != nil {
			return err
		}
		b.tokens--
		outcome := outcomeOf(created, refused)
		p := e.periodOf(slot)
		rec.Runs = append(rec.Runs, apiv1.BackfillRun{Period: p, ID: id, Outcome: outcome, WaitsFor: runIDs(waitingIn(rec.WaitsFor, p))})
		if outcome == OutcomeFired || outcome == OutcomeAlreadyFired {
			rec.Active = append(rec.Active, id)
		}
		if next := e.comp.Next(slot); !next.IsZero() && !next.After(rec.To) {
			rec.Next = &next
		} else {
			rec.Next = nil
		}
		s.fires.WithLabelValues(e.Tenant(), e.Def.Name, outcome).Inc()
		s.log.Info("schedule backfill: period started", "schedule", e.Def.Name, "tenant", e.Tenant(), "backfill", rec.ID,
			"period_start", slot, "id", id, "outcome", outcome, "active", len(rec.Active), "rerun", rec.Rerun)
		if err := s.putBackfill(ctx, t, &bs); err != nil {
			if errors.Is(err, errGone) && (outcome == OutcomeFired || outcome == OutcomeAlreadyFired) {
				// Cancelled (or deleted) since it was read: the run just
				// started is not its, and stops.
				if cerr := s.cancelRun(ctx, e, id, "backfill:"+rec.ID); cerr != nil {
					s.log.Warn("schedule backfill: run of a cancelled backfill not cancelled", "backfill", rec.ID, "id", id, "err", cerr)
				}
			}
			return err
		}
		changed = false
	}
	if rec.Next == nil && len(rec.Active) == 0 {
		now := s.now().UTC()
		rec.State, rec.FinishedAt, changed = apiv1.BackfillDone, &now, true
		s.log.Info("schedule backfill: done", "schedule", e.Def.Name, "tenant", e.Tenant(), "backfill", rec.ID, "periods", len(rec.Runs))
	}
	if changed {
		return s.putBackfill(ctx, t, &bs)
	}
	return nil
}

func (s *Scheduler) putBackfill(ctx context.Context, t *term, bs *bfStored) error {
	bs.Rec.Leader = t.l.Token()
	return s.store.PutBackfill(ctx, t.l, bs)
}

// outcomeOf names what starting a run did (start's results, err nil).
func outcomeOf(created bool, refused error) string {
	switch {
	case budgetRefusal(refused):
		return OutcomeBudgetExceeded
	case refused != nil:
		return OutcomeRejected
	case created:
		return OutcomeFired
	}
	return OutcomeAlreadyFired
}

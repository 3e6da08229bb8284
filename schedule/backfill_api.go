package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/ax-sched/ax/schedule/slots"

	"slices"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/schedule/backfill"
)

// Backfills and reruns as the API makes and reads them; tenant is as for
// the other schedule endpoints (service.go). Errors are *task.FieldError
// naming the request's field, ErrNotFound, or the global etcd failing.

// Backfill starts the runs of every period of tenant's schedule name in
// the request's range, oldest first, at most max_active at once. A period
// that has a run already (fired on time, or by an earlier backfill) is not
// run again: its run counts as the backfill's.
func (s *Scheduler) Backfill(ctx context.Context, name, tenant string, req *apiv1.BackfillRequest, by string) (*apiv1.Backfill, error) {
	sd, err := s.find(ctx, name, tenant)
	if err != nil {
		return nil, err
	}
	comp, err := slots.Compile(sd.Def.Cron, sd.Def.Timezone)
	if err != nil {
		return nil, err
	}
	r, slots, err := backfill.Parse(req, comp.Loc(), func(after, through time.Time, limit int) []time.Time {
		return comp.Between(after, through, limit)
	}, s.limits(sd.Tenant()).MaxBackfillPeriods)
	if err != nil {
		return nil, err
	}
	rec := &bfRecord{Backfill: apiv1.Backfill{From: r.From, To: r.To, MaxActive: r.MaxActive, Periods: len(slots)}}
	rec.Next = &slots[0]
	return s.createBackfills(ctx, []*rerunPart{{e: &entry{stored: sd}, rec: rec}}, by)
}

// Rerun runs one period of tenant's schedule name again, under a new run
// id (the rerun's number added to the slot): whatever its earlier runs
// did, the period gets a run of its own. With downstream, the schedules
// depending on it are rerun with it (rerun_down.go).
func (s *Scheduler) Rerun(ctx context.Context, name, tenant string, req *apiv1.RerunRequest, by string) (*apiv1.Backfill, error) {
	sd, err := s.find(ctx, name, tenant)
	if err != nil {
		return nil, err
	}
	comp, err := slots.Compile(sd.Def.Cron, sd.Def.Timezone)
	if err != nil {
		return nil, err
	}
	slot, err := backfill.ParseRerun(req, comp.Loc(), func(t time.Time) bool { return comp.Next(t.Add(-time.Second)).Equal(t) })
	if err != nil {
		return nil, err
	}
	if req.Downstream {
		return s.rerunDownstream(ctx, sd, comp, slot, by)
	}
	attempt, err := s.nextAttempt(ctx, sd, slot, slot)
	if err != nil {
		return nil, err
	}
	rec := &bfRecord{Backfill: apiv1.Backfill{From: slot, To: slot, MaxActive: 1, Periods: 1, Rerun: true}, Attempt: attempt}
	rec.Next = &slot
	return s.createBackfills(ctx, []*rerunPart{{e: &entry{stored: sd}, rec: rec}}, by)
}

// nextAttempt is the number of a new rerun of sd's slots from first to
// last: above every earlier rerun's that shares one of them, so no slot's
// run id repeats.
func (s *Scheduler) nextAttempt(ctx context.Context, sd stored, first, last time.Time) (int, error) {
	prior, err := s.store.BackfillsOf(ctx, sd.Key)
	if err != nil {
		return 0, unavailable(err)
	}
	attempt := 1
	for _, bs := range prior {
		if bs.Rec.Rerun && bs.Rec.DefRev == sd.Rev && !bs.Rec.From.After(last) && !bs.Rec.To.Before(first) {
			attempt = max(attempt, bs.Rec.Attempt+1)
		}
	}
	// Slots are whole seconds: the rerun's milliseconds keep its ids apart
	// from every slot's.
	if attempt > 999 {
		return 0, fieldError("period", "this period was run again 999 times already")
	}
	return attempt, nil
}

// createBackfills stores each part's record, RUNNING, as a new backfill of
// its schedule by by, all or none; it returns the first's. The first
// lists the others' (Downstream), and each wait names its upstream's.
func (s *Scheduler) createBackfills(ctx context.Context, parts []*rerunPart, by string) (*apiv1.Backfill, error) {
	sds := make([]stored, len(parts))
	recs := make([]*bfRecord, len(parts))
	for i, p := range parts {
		rec := p.rec
		rec.Schedule, rec.State, rec.CreatedAt, rec.CreatedBy, rec.DefRev = p.e.Def.Name, apiv1.BackfillRunning, s.now().UTC(), by, p.e.Rev
		rec.Runs, rec.Active = []apiv1.BackfillRun{}, []string{}
		sds[i], recs[i] = p.e.stored, rec
	}
	for attempt := 0; ; attempt++ {
		ids := map[string]string{}
		for _, rec := range recs {
			var b [4]byte
			if _, err := rand.Read(b[:]); err != nil {
				return nil, err
			}
			rec.ID = s.now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
			ids[rec.Schedule] = rec.ID
		}
		recs[0].Downstream = nil
		for _, rec := range recs[1:] {
			recs[0].Downstream = append(recs[0].Downstream, apiv1.RerunRef{Schedule: rec.Schedule, ID: rec.ID})
			for i := range rec.WaitsFor {
				rec.WaitsFor[i].Rerun = ids[rec.WaitsFor[i].Schedule]
			}
		}
		ok, err := s.store.CreateBackfills(ctx, sds, recs)
		switch {
		case err != nil:
			return nil, unavailable(err)
		case ok:
			out := recs[0].Backfill
			return &out, nil
		case attempt >= 3:
			// A definition changed generation (deleted, created again).
			return nil, ErrNotFound
		}
	}
}

// Backfills lists the backfills and reruns of tenant's schedule name,
// newest first.
func (s *Scheduler) Backfills(ctx context.Context, name, tenant string) ([]apiv1.Backfill, error) {
	sd, err := s.find(ctx, name, tenant)
	if err != nil {
		return nil, err
	}
	list, err := s.store.BackfillsOf(ctx, sd.Key)
	if err != nil {
		return nil, unavailable(err)
	}
	out := []apiv1.Backfill{}
	for _, bs := range slices.Backward(list) {
		if bs.Rec.DefRev == sd.Rev {
			out = append(out, bs.Rec.Backfill)
		}
	}
	return out, nil
}

// ErrBackfillNotFound: the schedule has no backfill with that id.
var ErrBackfillNotFound error = &apiv1.Error{Code: apiv1.CodeNotFound, Message: "no such backfill", Field: "id"}

// CancelBackfill cancels the backfill (or rerun) id of tenant's schedule
// name, as by: no period of it starts any more, and its active runs are
// asked to stop. A backfill that ended already is returned as it is.
func (s *Scheduler) CancelBackfill(ctx context.Context, name, tenant, id, by string) (*apiv1.Backfill, error) {
	sd, err := s.find(ctx, name, tenant)
	if err != nil {
		return nil, err
	}
	rec, found, err := s.store.CancelBackfill(ctx, sd.Key, sd.Rev, id, by, s.now().UTC())
	switch {
	case err != nil:
		return nil, unavailable(err)
	case !found:
		return nil, ErrBackfillNotFound
	}
	if rec.CanceledBy == by && rec.State == apiv1.BackfillCanceled {
		e := &entry{stored: sd}
		var failed []string
		for _, run := range rec.Active {
			if err := s.cancelRun(ctx, e, run, "backfill:"+rec.ID); err != nil {
				failed = append(failed, run)
			}
		}
		if len(failed) > 0 {
			return nil, &apiv1.Error{Code: apiv1.CodeUnavailable, RetryAfterSeconds: 1,
				Message: fmt.Sprintf("backfill cancelled; runs not reached yet, cancel again to retry: %v", failed)}
		}
	}
	out := rec.Backfill
	return &out, nil
}

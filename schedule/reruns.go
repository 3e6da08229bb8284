package schedule

import (
	"context"
	"errors"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// Reruns lists the run ids of the reruns of tenant's schedule name's
// period starting at period, oldest first: each is a DAG run when the
// schedule runs DAGs (as its slots' runs are), else a task.
func (s *Scheduler) Reruns(ctx context.Context, tenant, name string, period time.Time) ([]string, error) {
	sd, err := s.store.Get(ctx, tenant, name)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	runs, err := s.startedRuns(ctx, sd, true)
	var out []string
	for _, run := range runs {
		if run.Period.Start.Equal(period) {
			out = append(out, run.ID)
		}
	}
	return out, err
}

// startedRuns lists the runs sd's backfills and reruns (reruns: its reruns
// only) started, oldest first.
func (s *Scheduler) startedRuns(ctx context.Context, sd stored, reruns bool) ([]apiv1.BackfillRun, error) {
	list, err := s.store.BackfillsOf(ctx, sd.Key)
	if err != nil {
		return nil, err
	}
	var out []apiv1.BackfillRun
	for _, bs := range list {
		if bs.Rec.DefRev != sd.Rev || (reruns && !bs.Rec.Rerun) {
			continue
		}
		for _, run := range bs.Rec.Runs {
			if run.Outcome == OutcomeFired || run.Outcome == OutcomeAlreadyFired {
				out = append(out, run)
			}
		}
	}
	return out, nil
}

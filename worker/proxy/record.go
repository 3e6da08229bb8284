package proxy

import (
	"context"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Record records the outcomes of attempts remote workers held, in order;
// results[i] is os[i]'s result as stored (compact JSON, "" none), checked
// against the region's limit before (never cut here). lost[i] says os[i]'s lease was no longer the
// worker's: nothing of it was recorded. err is the store's failure.
func (p *Proxy) Record(ctx context.Context, os []apiv1.WorkerOutcome, results []string, _ int) (lost []bool, err error) {
	lost = make([]bool, len(os))
	var cs []queue.Completion
	var csAt []int
	for i, o := range os {
		var err error
		switch {
		case o.Status == apiv1.OutcomeSuccess:
			cs = append(cs, queue.Completion{ID: o.ID, Token: o.Lease, Result: results[i]})
			csAt = append(csAt, i)
			continue
		case o.Status == apiv1.OutcomeReturn:
			_, err = p.c.Return(ctx, o.ID, o.Lease, task.ReasonWorkerShutdown, time.Duration(o.RetryAfterMS)*time.Millisecond)
		case (o.Retry == nil || *o.Retry) && o.RetryAfterMS > 0:
			_, err = p.c.RetryAfter(ctx, o.ID, o.Lease, time.Duration(o.RetryAfterMS)*time.Millisecond)
		case o.Reason == task.ReasonResultTooLarge:
			_, _, err = p.c.Fail(ctx, queue.Failure{ID: o.ID, Token: o.Lease, Error: o.Error, Reason: o.Reason})
		default:
			_, _, err = p.c.Fail(ctx, queue.Failure{ID: o.ID, Token: o.Lease, Error: o.Error, Retryable: o.Retry == nil || *o.Retry})
		}
		if err != nil && !lostLease(err) {
			return lost, err
		}
		lost[i] = err != nil
	}
	if len(cs) == 0 {
		return lost, nil
	}
	errs, err := p.c.Complete(ctx, cs...)
	if err != nil {
		return lost, err
	}
	for k, i := range csAt {
		lost[i] = errs[k] != nil
	}
	return lost, nil
}

// Progress records a held task's progress; a lost lease records nothing
// and is no error.
func (p *Proxy) Progress(ctx context.Context, id, lease string, pr task.Progress) error {
	if err := p.c.Progress(ctx, id, lease, pr); err != nil && !lostLease(err) {
		return err
	}
	return nil
}

// Release gives back the tasks a leaving worker holds (WORKER_SHUTDOWN);
// those no longer its are skipped.
func (p *Proxy) Release(ctx context.Context, held []apiv1.WorkerLease) error {
	for _, l := range held {
		if _, err := p.c.Return(ctx, l.ID, l.Lease, task.ReasonWorkerShutdown, 0); err != nil && !lostLease(err) {
			return err
		}
	}
	return nil
}

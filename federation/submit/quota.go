package submit

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Quota is a tenant's submit rate: PerSecond tasks a second refill a
// bucket of Burst, which every server of the region shares (N servers
// grant a tenant its rate, not N times it). A zero Quota limits nothing.
type Quota struct {
	Tenant    string
	PerSecond float64
	Burst     int
}

// RateError is a request over its tenant's submit quota (429): Wait is
// how long until its tasks would fit.
type RateError struct {
	Quota
	Wait time.Duration
}

func (e *RateError) Error() string {
	return fmt.Sprintf("tenant %s is over its submit quota (%g tasks/s, burst %d)", e.Tenant, e.PerSecond, e.Burst)
}

// TakeQuota takes count submits from q's bucket in this region's store
// for a request that is not a task submit (a DAG's nodes, a schedule), or
// says why not: a *RateError with the wait until count would fit, or a
// *task.FieldError naming field (the request's list of tasks) when count
// can never fit at once. A store failure is returned as it is. A zero
// Quota, or a count of 0, takes nothing.
func (n *Pipeline) TakeQuota(ctx context.Context, q Quota, count int, field string) error {
	if err := q.fits(count, field); err != nil || !q.limits(count) {
		return err
	}
	ok, wait, err := n.cfg.Store.TakeQuota(ctx, q.Tenant, q.PerSecond, q.Burst, count)
	if err != nil {
		return err
	}
	if !ok {
		return &RateError{Quota: q, Wait: wait}
	}
	return nil
}

// limits reports whether count submits take anything from q's bucket.
func (q Quota) limits(count int) bool { return q.PerSecond > 0 && count > 0 }

// fits refuses count submits with a *task.FieldError naming field when
// they can never fit in q's bucket at once.
func (q Quota) fits(count int, field string) error {
	if q.limits(count) && count > q.Burst {
		return &task.FieldError{Field: field,
			Msg: fmt.Sprintf("%d tasks at once is more than tenant %s's submit burst (%d): send smaller batches", count, q.Tenant, q.Burst)}
	}
	return nil
}

// store is q's share for count submits, as the store step takes it with
// the request's first tasks.
func (q Quota) store(count int) queue.Quota {
	if !q.limits(count) {
		return queue.Quota{}
	}
	return queue.Quota{Tenant: q.Tenant, PerSecond: q.PerSecond, Burst: q.Burst, N: count}
}

// refused is the request's error for the store's *queue.QuotaError: a
// *RateError, or the store's failure as it is.
func (q Quota) refused(qe *queue.QuotaError) error {
	if qe.Err != nil {
		return qe.Err
	}
	return &RateError{Quota: q, Wait: qe.Wait}
}

// SubmitWithin is Submit within q: every spec of the request is taken
// from q's bucket, all or none, by the store step with the request's first
// tasks; a refusal (or a store failure while taking them) is the whole
// request's error, and nothing is submitted or forwarded.
func (n *Pipeline) SubmitWithin(ctx context.Context, q Quota, specs []*task.Spec, forwarded bool) ([]Outcome, error) {
	if err := q.fits(len(specs), "tasks"); err != nil {
		return nil, err
	}
	return n.submit(ctx, q, len(specs), specs, forwarded)
}

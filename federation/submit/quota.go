package submit

import (
	"context"
	"fmt"
	"time"

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

// TakeQuota is the quota step: it takes count submits from q's bucket in
// this region's store, or says why not: a *RateError with the wait until
// count would fit, or a *task.FieldError naming field (the request's list
// of tasks) when count can never fit at once. A store failure is returned
// as it is. A zero Quota, or a count of 0, takes nothing.
func (n *Pipeline) TakeQuota(ctx context.Context, q Quota, count int, field string) error {
	if q.PerSecond <= 0 || count == 0 {
		return nil
	}
	if count > q.Burst {
		return &task.FieldError{Field: field,
			Msg: fmt.Sprintf("%d tasks at once is more than tenant %s's submit burst (%d): send smaller batches", count, q.Tenant, q.Burst)}
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

// SubmitWithin is Submit after the quota step: every spec of the request
// is taken from q's bucket first, all or none; a refusal (or a store
// failure) is the whole request's error, and nothing is submitted.
func (n *Pipeline) SubmitWithin(ctx context.Context, q Quota, specs []*task.Spec, forwarded bool) ([]Outcome, error) {
	if err := n.TakeQuota(ctx, q, len(specs), "tasks"); err != nil {
		return nil, err
	}
	return n.Submit(ctx, specs, forwarded), nil
}

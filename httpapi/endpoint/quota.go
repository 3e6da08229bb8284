package endpoint

import (
	"context"

	"github.com/ax-sched/ax/federation/submit"
)

// QuotaBuckets takes submits from each tenant's bucket in the region's
// store; *federation.Node implements it (the submit pipeline's quota step).
type QuotaBuckets interface {
	// TakeQuota takes count submits from q's bucket: a
	// *submit.RateError when they do not fit now, a *task.FieldError
	// naming field when they never can.
	TakeQuota(ctx context.Context, q submit.Quota, count int, field string) error
}

// Quotas are the tenants' submit quotas. Only tokens of one
// tenant are limited; tokens of every tenant and other servers (whose own
// server counted the request) are not.
type Quotas struct {
	of      func(tenant string) (perSecond float64, burst int)
	buckets QuotaBuckets
	reserve *Reserve
}

// NewQuotas takes submits from buckets at the rate and burst of each
// tenant (nil: no quotas; a rate of 0: none for that tenant), and admits
// new tasks only while reserve does (nil: always).
func NewQuotas(of func(tenant string) (perSecond float64, burst int), buckets QuotaBuckets, reserve *Reserve) *Quotas {
	return &Quotas{of: of, buckets: buckets, reserve: reserve}
}

// Admit refuses a new task of tenant with a payload of bytes while the
// region's Redis is in its memory reserve (Reserve.Admit); nil when it
// may be submitted.
func (q *Quotas) Admit(ctx context.Context, tenant string, bytes int) error {
	if q == nil {
		return nil
	}
	return q.reserve.Admit(ctx, tenant, bytes)
}

// Of is p's quota; zero (no limit) for a principal that is not limited.
func (q *Quotas) Of(p Principal) submit.Quota {
	if q == nil || q.of == nil || p.Tenant == "" || p.Cluster {
		return submit.Quota{}
	}
	perSecond, burst := q.of(p.Tenant)
	return submit.Quota{Tenant: p.Tenant, PerSecond: perSecond, Burst: burst}
}

// Take takes n submits from p's tenant's bucket for a request that is not
// a task submit (a DAG's nodes, a schedule), or says why not: a 429 with
// the wait until n would fit, or a 400 naming field when n can never fit
// at once. A Redis failure is returned as it is (503 in the error map).
func (q *Quotas) Take(ctx context.Context, p Principal, n int, field string) error {
	if q == nil {
		return nil
	}
	if err := q.reserve.Admit(ctx, p.Tenant, 0); err != nil {
		return err
	}
	if q.buckets == nil {
		return nil
	}
	return q.buckets.TakeQuota(ctx, q.Of(p), n, field)
}

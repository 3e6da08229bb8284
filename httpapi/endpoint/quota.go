package endpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// QuotaBuckets holds each tenant's submit bucket in the region's store,
// shared by every server of the region; *federation.Node implements it.
type QuotaBuckets interface {
	// TakeQuota takes count submits from tenant's bucket (perSecond
	// refill, burst size); not ok, wait is how long until they would fit.
	TakeQuota(ctx context.Context, tenant string, perSecond float64, burst, count int) (ok bool, wait time.Duration, err error)
}

// Quotas take each tenant's submits from its bucket (QuotaBuckets): N
// servers grant a tenant its rate, not N times it. Only tokens of one
// tenant are limited; tokens of every tenant and other servers (whose own
// server counted the request) are not.
type Quotas struct {
	of      func(tenant string) (perSecond float64, burst int)
	buckets QuotaBuckets
}

// NewQuotas takes submits from buckets at the rate and burst of takes
// each tenant (nil: no quotas; a rate of 0: none for that tenant).
func NewQuotas(of func(tenant string) (perSecond float64, burst int), buckets QuotaBuckets) *Quotas {
	return &Quotas{of: of, buckets: buckets}
}

// Take takes n submits from p's tenant's bucket, or says why not: a 429
// with the wait until n would fit, or a 400 naming field (the request's
// list of tasks) when n can never fit at once. A Redis failure is returned
// as it is (503 in the error map).
func (q *Quotas) Take(ctx context.Context, p Principal, n int, field string) error {
	if q == nil || q.of == nil || p.Tenant == "" || p.Cluster || n == 0 {
		return nil
	}
	perSecond, burst := q.of(p.Tenant)
	if perSecond <= 0 {
		return nil
	}
	if n > burst {
		return &Error{Code: apiv1.CodeInvalid, Field: field,
			Msg: fmt.Sprintf("%d tasks at once is more than tenant %s's submit burst (%d): send smaller batches", n, p.Tenant, burst)}
	}
	ok, wait, err := q.buckets.TakeQuota(ctx, p.Tenant, perSecond, burst, n)
	if err != nil {
		return err
	}
	if !ok {
		return &Error{Code: apiv1.CodeQuotaExceeded, RetryAfter: wait,
			Msg: fmt.Sprintf("tenant %s is over its submit quota (%g tasks/s, burst %d)", p.Tenant, perSecond, burst)}
	}
	return nil
}

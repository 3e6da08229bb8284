package httpapi

import (
	"context"
	"fmt"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
)

// quotas take each tenant's submits from its bucket in the region's Redis
// (queue.Store.TakeQuota), which every server of the region shares: N
// servers grant a tenant its rate, not N times it. Only tokens of one
// tenant are limited; tokens of every tenant and other servers (whose own
// server counted the request) are not.
type quotas struct {
	of    func(tenant string) (perSecond float64, burst int)
	store *queue.Store
}

// take takes n submits from p's tenant's bucket, or says why not: a 429
// with the wait until n would fit, or a 400 naming field (the request's
// list of tasks) when n can never fit at once. A Redis failure is returned
// as it is (503 in the error map).
func (q *quotas) take(ctx context.Context, p Principal, n int, field string) error {
	if q == nil || q.of == nil || p.Tenant == "" || p.Cluster || n == 0 {
		return nil
	}
	perSecond, burst := q.of(p.Tenant)
	if perSecond <= 0 {
		return nil
	}
	if n > burst {
		return &apiError{status: 400, code: apiv1.CodeInvalid, field: field,
			msg: fmt.Sprintf("%d tasks at once is more than tenant %s's submit burst (%d): send smaller batches", n, p.Tenant, burst)}
	}
	ok, wait, err := q.store.TakeQuota(ctx, p.Tenant, perSecond, burst, n)
	if err != nil {
		return err
	}
	if !ok {
		return &apiError{status: 429, code: apiv1.CodeQuotaExceeded, retryAfter: wait,
			msg: fmt.Sprintf("tenant %s is over its submit quota (%g tasks/s, burst %d)", p.Tenant, perSecond, burst)}
	}
	return nil
}

// tenantOr is the tenant a spec without one gets (task.Spec.Normalize).
func tenantOr(tenant string) string {
	if tenant == "" {
		return "default"
	}
	return tenant
}

package httpapi

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ax-sched/ax/apiv1"
)

// quotas hold each tenant's submit bucket on this server. Only tokens of
// one tenant are limited (their tenant names come from the configured
// tokens, so the map stays small); tokens of every tenant and other
// servers (whose own server counted the request) are not.
type quotas struct {
	of  func(tenant string) (perSecond float64, burst int)
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// take takes n submits from p's tenant's bucket, or says why not: a 429
// with the wait until n would fit, or a 400 when n can never fit at once.
func (q *quotas) take(p Principal, n int) error {
	if q == nil || q.of == nil || p.Tenant == "" || p.Cluster || n == 0 {
		return nil
	}
	perSecond, burst := q.of(p.Tenant)
	if perSecond <= 0 {
		return nil
	}
	q.mu.Lock()
	lim, ok := q.buckets[p.Tenant]
	if !ok || lim.Limit() != rate.Limit(perSecond) || lim.Burst() != burst {
		lim = rate.NewLimiter(rate.Limit(perSecond), burst)
		q.buckets[p.Tenant] = lim
	}
	q.mu.Unlock()
	if n > burst {
		return &apiError{status: 400, code: apiv1.CodeInvalid, field: "tasks",
			msg: fmt.Sprintf("%d tasks at once is more than tenant %s's submit burst (%d): send smaller batches", n, p.Tenant, burst)}
	}
	now := q.now()
	r := lim.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &apiError{status: 429, code: apiv1.CodeQuotaExceeded, retryAfter: d,
			msg: fmt.Sprintf("tenant %s is over its submit quota (%g tasks/s, burst %d)", p.Tenant, perSecond, burst)}
	}
	return nil
}

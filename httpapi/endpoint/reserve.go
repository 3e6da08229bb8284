package endpoint

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// MemoryUse is how full the region's Redis is: Used and Max (maxmemory;
// 0: none) of its fullest Redis, and Top, the tenant whose unfinished
// tasks hold the most payload bytes in the region ("" when none does).
type MemoryUse struct {
	Used, Max int64
	Top       string
}

// Reserve keeps the last share of the region's Redis memory for work
// already accepted (quotas.memory_reserve): past maxmemory × (1 − share)
// the tenant holding the most payload bytes is refused new tasks (429),
// past maxmemory × (1 − share/4) every tenant is (503), so that Redis never
// refuses the writes of running tasks (leases, results) for want of
// memory. It reads the memory at most once every ReserveRefresh, during
// a request (no goroutine of its own); the other requests meanwhile use
// the last reading plus the payload bytes this server admitted since it
// was taken, so a flood through this server cannot outrun the reading.
// Safe for concurrent use; a nil *Reserve admits all.
type Reserve struct {
	share func() float64
	read  func(context.Context) (MemoryUse, error)
	now   func() time.Time

	busy  atomic.Bool  // one request reads at a time
	since atomic.Int64 // payload bytes admitted since the last reading
	mu    sync.Mutex
	last  MemoryUse
	at    time.Time
}

// ReserveRefresh is how old a reading of the memory may be: INFO memory
// and the tenants' byte counts cost Redis a few microseconds, ten times a
// second per server. Other servers' submits since the last reading are
// not seen: the reserve must hold a tenth of a second of the region's
// submits.
const ReserveRefresh = 100 * time.Millisecond

// NewReserve reads the memory with read and the reserve's share (0: off)
// with share at each request, so a reload applies at once.
func NewReserve(share func() float64, read func(context.Context) (MemoryUse, error)) *Reserve {
	return &Reserve{share: share, read: read, now: time.Now}
}

// Admit refuses a new task of tenant with a payload of bytes when the
// region's Redis is in the reserve: an *Error 429 quota_exceeded naming
// memory_reserve when tenant holds the most payload bytes, a 503
// unavailable for every tenant past the last quarter of the reserve; nil
// otherwise (also when the memory cannot be read: the submit's own Redis
// call then answers for Redis), and bytes count as used until the next
// reading.
func (r *Reserve) Admit(ctx context.Context, tenant string, bytes int) error {
	if r == nil || r.read == nil || r.share == nil {
		return nil
	}
	share := r.share()
	if share <= 0 {
		return nil
	}
	m := r.reading(ctx)
	if m.Max <= 0 {
		return nil
	}
	used := float64(m.Used+r.since.Load()) / float64(m.Max)
	switch {
	case used >= 1-share/4:
		return &Error{Code: apiv1.CodeUnavailable, RetryAfter: 5 * time.Second,
			Msg: fmt.Sprintf("the region's Redis is %.0f %% full (quotas.memory_reserve): new tasks are refused until some finish, retry later", 100*used)}
	case used >= 1-share && m.Top != "" && m.Top == tenantName(tenant):
		return &Error{Code: apiv1.CodeQuotaExceeded, Field: "memory_reserve", RetryAfter: 5 * time.Second,
			Msg: fmt.Sprintf("the region's Redis is %.0f %% full and tenant %s's unfinished tasks hold the most payload bytes there: wait for some to finish", 100*used, m.Top)}
	}
	r.since.Add(int64(bytes))
	return nil
}

// reading is the last reading, read anew first when it is older than
// ReserveRefresh and no other request is reading.
func (r *Reserve) reading(ctx context.Context) MemoryUse {
	r.mu.Lock()
	m, at := r.last, r.at
	r.mu.Unlock()
	now := r.now()
	if now.Sub(at) < ReserveRefresh || !r.busy.CompareAndSwap(false, true) {
		return m
	}
	defer r.busy.Store(false)
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fresh, err := r.read(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = now
	if err == nil {
		r.last = fresh
		r.since.Store(0)
	}
	return r.last
}

// tenantName is the name a task's tenant has in MemoryUse.Top.
func tenantName(tenant string) string {
	if tenant == "" {
		return "default"
	}
	return tenant
}

package submit

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/ax-sched/ax/queue"
)

// TakeQuota takes n submits from tenant's bucket (refilled at perSecond,
// holding at most burst), shared by every server of the region: the bucket
// is one key in the region's Redis (in the shard of the tenant's name, so
// one slot on a Cluster), changed by one script. It reports whether they
// were taken and, when not, how long until they would be there. perSecond
// ≤ 0 takes nothing and always succeeds.
func (s *Submitter) TakeQuota(ctx context.Context, tenant string, perSecond float64, burst, n int) (bool, time.Duration, error) {
	if perSecond <= 0 || n <= 0 {
		return true, 0, nil
	}
	shard := s.ShardForKey(tenant, "")
	// micro-tasks per ms, at least 1 (a rate under 0.001/s is 0.001/s).
	rate := max(1, int64(math.Round(perSecond*1000)))
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Quota, s.KeysWith(shard, queue.QuotaKey(s.Prefix(shard), tenant)),
		s.Clock(), rate, burst, n).Slice()
	if err != nil {
		return false, 0, fmt.Errorf("queue: quota: %w", err)
	}
	if queue.ToInt(out[0]) == queue.CodeOK {
		return true, 0, nil
	}
	ms, _ := strconv.ParseInt(queue.ToStr(out[1]), 10, 64)
	return false, time.Duration(ms) * time.Millisecond, nil
}

// SubmitWithin is Submit after the quota step: it takes q's N submits
// from the tenant's bucket, then stores tasks (none: it only takes the
// quota). When the bucket refuses them or cannot be read, nothing is
// stored and the error is a *queue.QuotaError.
func (s *Submitter) SubmitWithin(ctx context.Context, q queue.Quota, tasks ...queue.NewTask) ([]queue.SubmitResult, error) {
	ok, wait, err := s.TakeQuota(ctx, q.Tenant, q.PerSecond, q.Burst, q.N)
	switch {
	case err != nil:
		return nil, &queue.QuotaError{Err: err}
	case !ok:
		return nil, &queue.QuotaError{Wait: wait}
	case len(tasks) == 0:
		return nil, nil
	}
	return s.Submit(ctx, tasks...)
}

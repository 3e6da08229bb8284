package claim

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
)

// RetryAfter gives a RUNNING task back without spending a retry and pauses
// its tenant's tasks of its limit key (of its type when it names none) for
// every worker of the region until now + d (cut to MaxRetryAfter, at least 1 ms). The task
// waits READY until then. A cancel requested meanwhile wins (CANCELED).
// A pause that would take the task's paused time past its pause budget
// (task.Spec.MaxPause, else the region's Defaults.MaxPause) pauses nothing:
// the attempt fails (task.ReasonMaxPauseExceeded), PENDING for its retry
// or FAILED, as Fail's would.
func (s *Claimer) RetryAfter(ctx context.Context, id, token string, d time.Duration) (task.State, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return "", err
	}
	d = min(max(d, time.Millisecond), queue.MaxRetryAfter)
	o := s.Options()
	budget := cmp.Or(o.Defaults.MaxPause, task.DefaultDefaults().MaxPause)
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Ret, s.KeysWith(shard), s.Clock(), id, token, task.ReasonRetryAfter,
		0, o.RetainCanceled.Milliseconds(), d.Milliseconds(), budget.Milliseconds(), rand.IntN(1000),
		o.RetainDead.Milliseconds(), o.Defaults.MaxRetries, o.Defaults.RetryBase.Milliseconds(),
		o.Defaults.RetryCap.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: retry after: %w", err)
	}
	if err := leaseResult(id, out); err != nil {
		return "", err
	}
	return record.StateOf(queue.ToStr(out[1])), nil
}

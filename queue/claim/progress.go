package claim

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
)

// Progress records how far a running attempt got, for the lease holder
// only: ErrLeaseLost when token is no longer the task's lease,
// task.ErrNotFound when there is no such task. Within an attempt the
// recorded percent never goes down; reads of the task show the last
// progress recorded (task.Task.Progress). A worker that heartbeats sends
// progress with its heartbeat (queue.Lease.Progress) instead.
func (s *Claimer) Progress(ctx context.Context, id, token string, p task.Progress) error {
	shard, err := s.ShardOf(id)
	if err != nil {
		return err
	}
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Progress, s.KeysWith(shard), s.Clock(), id, token,
		strconv.FormatFloat(p.Percent, 'f', -1, 64), record.Clean(p.Message, task.MaxProgressMessage)).Slice()
	if err != nil {
		return fmt.Errorf("queue: progress: %w", err)
	}
	return leaseResult(id, out)
}

// progressArg is a heartbeat's progress argument for one lease ("": none).
func progressArg(p *task.Progress) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(min(max(p.Percent, 0), 100), 'f', -1, 64) + "\t" + record.Clean(p.Message, task.MaxProgressMessage)
}

package claim

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Progress records how far a running attempt got, for the lease holder
// only: ErrLeaseLost when token is no longer the task's lease,
// task.ErrNotFound when there is no such task. Reads of the task show the
// last progress recorded (task.Task.Progress).
func (s *Claimer) Progress(ctx context.Context, id, token string, p task.Progress) error {
	shard, err := s.ShardOf(id)
	if err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("queue: progress: %w", err)
	}
	out, err := s.Run(ctx, s.RDB, queue.Scripts.Progress, s.KeysWith(shard), s.Clock(), id, token, string(b)).Slice()
	if err != nil {
		return fmt.Errorf("queue: progress: %w", err)
	}
	return leaseResult(id, out)
}

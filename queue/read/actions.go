package read

import (
	"context"
	"fmt"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Cancel cancels a task: PENDING/READY at once (returns CANCELED), RUNNING
// as a request (returns RUNNING). Terminal tasks give a *TransitionError,
// handed-off ones a *HandedOffError.
func (s *Tasks) Cancel(ctx context.Context, id, reason, by string) (task.State, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return "", err
	}
	if reason == "" {
		reason = task.ReasonCanceledByUser
	}
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Cancel, s.KeysWith(shard), s.Clock(), id, reason, by,
		s.Options().RetainCanceled.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: cancel: %w", err)
	}
	st, err := s.OpResult(id, "cancel", out)
	if s.ThawedOn(ctx, id, err) {
		return s.Cancel(ctx, id, reason, by)
	}
	return st, err
}

// Replay puts a dead letter back (FAILED→PENDING) with a fresh retry budget.
// A handed-off task gives a *HandedOffError naming where it lives.
func (s *Tasks) Replay(ctx context.Context, id, by string) error {
	shard, err := s.ShardOf(id)
	if err != nil {
		return err
	}
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Replay, s.KeysWith(shard), s.Clock(), id, by).Slice()
	if err != nil {
		return fmt.Errorf("queue: replay: %w", err)
	}
	_, err = s.OpResult(id, "replay", out)
	if s.ThawedOn(ctx, id, err) {
		return s.Replay(ctx, id, by)
	}
	return err
}

// SetPriority changes a live task's priority; a READY task keeps its place
// in time.
func (s *Tasks) SetPriority(ctx context.Context, id string, priority int, by string) error {
	if priority < 0 || priority > task.MaxPriority {
		return &task.FieldError{Field: "priority", Msg: fmt.Sprintf("must be between 0 and %d", task.MaxPriority)}
	}
	shard, err := s.ShardOf(id)
	if err != nil {
		return err
	}
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Priority, s.KeysWith(shard), s.Clock(), id, priority, by).Slice()
	if err != nil {
		return fmt.Errorf("queue: priority: %w", err)
	}
	_, err = s.OpResult(id, "change the priority of", out)
	if s.ThawedOn(ctx, id, err) {
		return s.SetPriority(ctx, id, priority, by)
	}
	return err
}

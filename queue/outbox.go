package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outbox returns up to limit tasks waiting to be handed to another region
// whose next attempt is due. Each has HandOffTarget and Pool set. Read-only.
func (s *Store) Outbox(ctx context.Context, limit int) ([]*Task, error) {
	limit = clampBatch(limit)
	now := strconv.FormatInt(s.now().UnixMilli(), 10)
	var out []*Task
	for shard := range s.keys {
		ids, err := s.rdb.ZRangeByScore(ctx, s.keys[shard].prefix+"outbox",
			&redis.ZRangeBy{Min: "-inf", Max: now, Count: int64(limit)}).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: outbox: %w", err)
		}
		ts, err := s.getMany(ctx, shard, ids)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// HandOffDone records the receiver's definite answer: accepted moves the
// task to HANDED_OFF (its record forwards there); refused sends it back to
// placement.
func (s *Store) HandOffDone(ctx context.Context, id string, accepted bool) error {
	shard, err := s.shardOf(id)
	if err != nil {
		return err
	}
	outcome := "refused"
	if accepted {
		outcome = "accepted"
	}
	out, err := scripts.handoff.Run(ctx, s.rdb, s.keysWith(shard, s.keys[shard].prefix+"outbox"),
		s.clock(), id, outcome, s.opts.RetainDead.Milliseconds()).Slice()
	if err != nil {
		return fmt.Errorf("queue: hand-off: %w", err)
	}
	if toInt(out[0]) != 0 {
		return &TransitionError{ID: id, State: stateOf(toStr(out[1])), Op: "complete the hand-off of"}
	}
	return nil
}

// HandOffRetry schedules the next attempt of an unanswered hand-off — the
// same target, the same id — at the given time.
func (s *Store) HandOffRetry(ctx context.Context, id string, at time.Time) error {
	shard, err := s.shardOf(id)
	if err != nil {
		return err
	}
	return s.rdb.ZAddXX(ctx, s.keys[shard].prefix+"outbox", redis.Z{Score: float64(at.UnixMilli()), Member: id}).Err()
}

// SpecOf rebuilds the submittable spec of a stored task (for hand-off).
func SpecOf(t *Task) *Spec {
	p, mr := t.Priority, t.MaxRetries
	sp := &Spec{
		Type: t.Type, Payload: t.Payload, Priority: &p, Tags: t.Tags, Regions: t.Regions,
		Timeout: t.Timeout, MaxRetries: &mr, RetryBase: t.RetryBase, RetryCap: t.RetryCap,
		Preemptible: t.Preemptible, Critical: t.Critical, Tenant: t.Tenant, TraceID: t.TraceID,
	}
	return sp
}

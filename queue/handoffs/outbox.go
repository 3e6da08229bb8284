package handoffs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Outbox returns up to limit tasks waiting to be handed to another region
// whose next attempt is due, per shard: at most MaxOutboxRead (a sender's
// wave of batches; MaxBatch when limit ≤ 0). Each has HandOffTarget and
// Pool set. Read-only.
func (s *HandOffs) Outbox(ctx context.Context, limit int) ([]*task.Task, error) {
	return s.OutboxExcept(ctx, limit, nil)
}

// OutboxExcept is Outbox without the records of the ids skip reports (a
// sender's tasks in flight): their ids count against limit, but their
// records are not read. A nil skip skips none.
func (s *HandOffs) OutboxExcept(ctx context.Context, limit int, skip func(id string) bool) ([]*task.Task, error) {
	if limit <= 0 {
		limit = queue.MaxBatch
	}
	limit = min(limit, queue.MaxOutboxRead)
	now := strconv.FormatInt(s.Now().UnixMilli(), 10)
	var out []*task.Task
	for shard := range s.Shards() {
		ids, err := s.Client().ZRangeByScore(ctx, queue.OutboxKey(s.Prefix(shard)),
			&redis.ZRangeBy{Min: "-inf", Max: now, Count: int64(limit)}).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: outbox: %w", err)
		}
		if skip != nil {
			ids = slices.DeleteFunc(ids, skip)
		}
		if len(ids) == 0 {
			continue
		}
		ts, err := s.GetMany(ctx, shard, ids)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// HandOffDone records the receiver's definite answer: accepted moves the
// task to HANDED_OFF (its record forwards there); refused sends it back to
// placement. A leader passes its fence (see HandOffDoneMany).
func (s *HandOffs) HandOffDone(ctx context.Context, id string, accepted bool, f ...queue.Fence) error {
	errs, err := s.HandOffDoneMany(ctx, []queue.HandOffAnswer{{ID: id, Accepted: accepted}}, f...)
	if err != nil {
		return err
	}
	return errs[0]
}

// HandOffDoneMany records many definite answers (HandOffDone for each) in
// one script call per shard and at most MaxBatch answers. Per-answer errors
// are in input order: nil when recorded, ErrBadID, or a *TransitionError
// when the task is not in the outbox (nothing changed for it). The error is
// for Redis failures, and ErrFenced when f, the caller's leadership, is
// older than one a shard has seen (nothing is recorded there then); answers
// of shards not written by then carry it too.
func (s *HandOffs) HandOffDoneMany(ctx context.Context, answers []queue.HandOffAnswer, f ...queue.Fence) ([]error, error) {
	errs := make([]error, len(answers))
	byShard := make([][]int, s.Shards())
	for i, a := range answers {
		shard, err := s.ShardOf(a.ID)
		if err != nil {
			errs[i] = err
			continue
		}
		byShard[shard] = append(byShard[shard], i)
	}
	var failed error
	for shard, idx := range byShard {
		for start := 0; start < len(idx); start += queue.MaxBatch {
			chunk := idx[start:min(start+queue.MaxBatch, len(idx))]
			if failed == nil {
				failed = s.handOffDoneShard(ctx, shard, answers, chunk, errs, f)
			}
			if failed != nil {
				for _, i := range chunk {
					errs[i] = failed
				}
			}
		}
	}
	return errs, failed
}

func (s *HandOffs) handOffDoneShard(ctx context.Context, shard int, answers []queue.HandOffAnswer, idx []int, errs []error, f []queue.Fence) error {
	keys := s.KeysWith(shard, queue.OutboxKey(s.Prefix(shard)))
	token := ""
	if len(f) > 0 {
		keys = append(keys, queue.FenceKey(s.Prefix(shard), f[0]))
		token = strconv.FormatInt(f[0].Token, 10)
	}
	argv := make([]any, 0, 4+2*len(idx))
	argv = append(argv, s.Clock(), s.Options().RetainDead.Milliseconds(), s.Options().RetainCanceled.Milliseconds(), token)
	for _, i := range idx {
		outcome := "refused"
		switch {
		case answers[i].Revoked:
			outcome = "revoked"
		case answers[i].Accepted && answers[i].Canceled:
			outcome = "accepted-canceled"
		case answers[i].Accepted:
			outcome = "accepted"
		}
		argv = append(argv, answers[i].ID, outcome)
	}
	out, err := s.Run(ctx, s.Client(), queue.Scripts.Handoff, keys, argv...).Slice()
	if err != nil {
		return fmt.Errorf("queue: hand-off: %w", err)
	}
	if queue.Fenced(out) {
		return queue.ErrFenced
	}
	if len(out) != len(idx) {
		return fmt.Errorf("queue: hand-off: %d results for %d answers", len(out), len(idx))
	}
	for k, i := range idx {
		switch r := queue.ToStr(out[k]); r {
		case "0":
		case "2":
			errs[i] = queue.ErrSendCancel
		default:
			errs[i] = &task.TransitionError{ID: answers[i].ID, State: record.StateOf(strings.TrimPrefix(r, "1")), Op: "complete the hand-off of"}
		}
	}
	return nil
}

// HandOffRetry schedules the next attempt of an unanswered hand-off — the
// same target, the same id — at the given time.
func (s *HandOffs) HandOffRetry(ctx context.Context, id string, at time.Time) error {
	return s.HandOffRetryMany(ctx, []queue.OutboxRetry{{ID: id, At: at}})
}

// HandOffRetryMany schedules the next attempts of many unanswered
// hand-offs (HandOffRetry for each) in one round trip: one ZADD XX per
// shard. Tasks no longer in the outbox are left alone. It takes no fence: it
// changes only when a task in the outbox is sent next, never what becomes
// of it, so a deposed leader's retry at worst delays the next leader's
// attempt by one backoff.
func (s *HandOffs) HandOffRetryMany(ctx context.Context, retries []queue.OutboxRetry) error {
	byShard := make([][]redis.Z, s.Shards())
	for _, r := range retries {
		shard, err := s.ShardOf(r.ID)
		if err != nil {
			return err
		}
		byShard[shard] = append(byShard[shard], redis.Z{Score: float64(r.At.UnixMilli()), Member: r.ID})
	}
	pipe := s.Client().Pipeline()
	for shard, zs := range byShard {
		for start := 0; start < len(zs); start += queue.MaxBatch {
			pipe.ZAddXX(ctx, queue.OutboxKey(s.Prefix(shard)), zs[start:min(start+queue.MaxBatch, len(zs))]...)
		}
	}
	if pipe.Len() == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("queue: hand-off retry: %w", err)
	}
	return nil
}

// InOutbox reports, for each of ids, whether it waits in the outbox still
// (not yet answered by its target): one pipelined ZSCORE per id, a
// pipeline per shard. A malformed id is reported absent. Read-only.
func (s *HandOffs) InOutbox(ctx context.Context, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	byShard := make(map[int][]int)
	for i, id := range ids {
		if shard, err := s.ShardOf(id); err == nil {
			byShard[shard] = append(byShard[shard], i)
		}
	}
	for shard, idx := range byShard {
		pipe := s.Client().Pipeline()
		cmds := make([]*redis.FloatCmd, len(idx))
		for k, i := range idx {
			cmds[k] = pipe.ZScore(ctx, queue.OutboxKey(s.Prefix(shard)), ids[i])
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("queue: in outbox: %w", err)
		}
		for k, i := range idx {
			out[i] = cmds[k].Err() == nil
		}
	}
	return out, nil
}

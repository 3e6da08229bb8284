package read

import (
	"context"
	"fmt"
	"strings"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Waiting scans PENDING and READY tasks matching f, calling fn with
// batches of up to 500. It is an operator path (O(waiting tasks)), not a
// hot one.
func (s *Tasks) Waiting(ctx context.Context, f queue.Filter, fn func([]*task.Task) error) error {
	for shard := range s.Shards() {
		p := s.Prefix(shard)
		sets := []string{}
		if f.State == "" || f.State == task.Pending {
			// The outbox too: a cancel there is a request the hand-off
			// carries (cancel.lua).
			sets = append(sets, queue.DelayedKey(p), queue.DelayedUnplacedKey(p), queue.DueKey(p), queue.OutboxKey(p))
			// Pinned delayed tasks wait in per-pool delayed sets.
			ds, err := s.ScanKeys(ctx, queue.PinnedDelayedPattern(p))
			if err != nil {
				return err
			}
			sets = append(sets, ds...)
		}
		if f.State == "" || f.State == task.Ready {
			match := queue.ReadyPattern(p, "*")
			if f.Pool != "" {
				match = queue.ReadyPattern(p, f.Pool)
			}
			qs, err := s.ScanKeys(ctx, match)
			if err != nil {
				return err
			}
			sets = append(sets, qs...)
		}
		for _, set := range sets {
			var cursor uint64
			for {
				kv, next, err := s.Client().ZScan(ctx, set, cursor, "", 500).Result()
				if err != nil {
					return fmt.Errorf("queue: zscan: %w", err)
				}
				ids := make([]string, 0, len(kv)/2)
				for i := 0; i < len(kv); i += 2 {
					if !strings.HasPrefix(kv[i], "~") { // a marker of a pinned delayed set
						ids = append(ids, kv[i])
					}
				}
				ts, err := s.GetMany(ctx, shard, ids)
				if err != nil {
					return err
				}
				var keep []*task.Task
				for _, t := range ts {
					if f.Match(t) {
						keep = append(keep, t)
					}
				}
				if len(keep) > 0 {
					if err := fn(keep); err != nil {
						return err
					}
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		if f.State == "" || f.State == task.Pending {
			if err := s.WaitingCold(ctx, shard, f, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// CancelWhere cancels every PENDING/READY task matching f and returns how
// many it cancelled.
func (s *Tasks) CancelWhere(ctx context.Context, f queue.Filter, by string) (int, error) {
	n := 0
	err := s.Waiting(ctx, f, func(ts []*task.Task) error {
		for _, t := range ts {
			if _, err := s.Cancel(ctx, t.ID, task.ReasonCanceledByUser, by); err == nil {
				n++
			}
		}
		return nil
	})
	return n, err
}

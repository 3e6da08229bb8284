package maint

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ax-sched/ax/queue"
)

// Replace is the leader's re-placement of READY tasks of pool when the
// world changed under them (their pool's price rose past a threshold, its
// capacity window closed): each task still READY in pool, not pinned to it
// and not parked by a limit, goes READY→PENDING (REPLACED_COST, why in its
// trail step) into the due set, where the place loop places it with the
// figures of now. The others are left alone. It returns how many moved;
// ErrFenced once a newer leader exists (nothing of that shard's batch
// moved).
func (s *Maintainer) Replace(ctx context.Context, f queue.Fence, pool, why string, ids []string) (int, error) {
	byShard := make([][]any, s.Shards())
	for _, id := range ids {
		shard, err := s.ShardOf(id)
		if err != nil {
			continue
		}
		byShard[shard] = append(byShard[shard], id)
	}
	total := 0
	for shard, items := range byShard {
		for start := 0; start < len(items); start += queue.MaxBatch {
			chunk := items[start:min(start+queue.MaxBatch, len(items))]
			keys := s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f))
			argv := append([]any{s.Clock(), strconv.FormatInt(f.Token, 10), pool, why}, chunk...)
			out, err := s.Run(ctx, s.Client(), queue.Scripts.Replace, keys, argv...).Slice()
			if err != nil {
				return total, fmt.Errorf("queue: replace: %w", err)
			}
			if queue.Fenced(out) {
				return total, queue.ErrFenced
			}
			total += queue.ToInt(out[0])
		}
	}
	return total, nil
}

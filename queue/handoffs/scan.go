package handoffs

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ax-sched/ax/queue"
)

// Drain moves READY tasks into the outbox, bound for other regions. An
// operator's drain passes no fence; a leader loop passes its own, and gets
// ErrFenced once a newer leader exists.
func (s *HandOffs) Drain(ctx context.Context, moves []queue.DrainMove, f ...queue.Fence) (int, error) {
	byShard := make([][]any, s.Shards())
	for _, m := range moves {
		shard, err := s.ShardOf(m.ID)
		if err != nil {
			continue
		}
		byShard[shard] = append(byShard[shard], m.ID, m.Region, m.Pool)
	}
	total := 0
	for shard, items := range byShard {
		for start := 0; start < len(items); start += 3 * queue.MaxBatch {
			chunk := items[start:min(start+3*queue.MaxBatch, len(items))]
			keys := s.KeysWith(shard, queue.OutboxKey(s.Prefix(shard)))
			token := ""
			if len(f) > 0 {
				keys = append(keys, queue.FenceKey(s.Prefix(shard), f[0]))
				token = strconv.FormatInt(f[0].Token, 10)
			}
			argv := append([]any{s.Clock(), len(chunk) / 3, token}, chunk...)
			out, err := s.Run(ctx, s.Client(), queue.Scripts.Drain, keys, argv...).Slice()
			if err != nil {
				return total, fmt.Errorf("queue: drain: %w", err)
			}
			if queue.Fenced(out) {
				return total, queue.ErrFenced
			}
			total += queue.ToInt(out[0])
		}
	}
	return total, nil
}

package maint

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
)

// PromoteCold moves cold tasks whose bucket starts within half the cold
// horizon to the hot delayed sets, at most limit per shard and call
// (≤ MaxBatch), in scripts of at most coldChunk. It returns how many
// moved and the start of the earliest bucket left (zero when none).
// Leader only: fenced.
func (s *Maintainer) PromoteCold(ctx context.Context, f queue.Fence, limit int) (int, time.Time, error) {
	limit = queue.ClampBatch(limit)
	lead := (s.Options().ColdHorizon / 2).Milliseconds()
	moved := 0
	var next time.Time
	for shard := range s.Shards() {
		for done := 0; done < limit; {
			n := min(queue.ColdChunk, limit-done)
			out, err := s.Run(ctx, s.Client(), queue.Scripts.Cold, s.ColdKeys(shard, queue.FenceKey(s.Prefix(shard), f)),
				s.Clock(), "promote", f.Token, lead, n).Slice()
			if err != nil {
				return moved, next, fmt.Errorf("queue: promote cold: %w", err)
			}
			if queue.Fenced(out) {
				return moved, next, queue.ErrFenced
			}
			m := queue.ToInt(out[0])
			moved += m
			nb := record.MsTime(queue.ToStr(out[1]))
			if nb != nil && (next.IsZero() || nb.Before(next)) {
				next = *nb
			}
			seen := queue.ToInt(out[2])
			if seen < n {
				break // no more ahead
			}
			done += seen
		}
	}
	return moved, next, nil
}

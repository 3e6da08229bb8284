package maint

import (
	"context"
	"fmt"

	"github.com/ax-sched/ax/queue"
)

// TrimRunTimes keeps each shard's run-time hash well under its cap
// (Options.RunTimePairs, which the scripts never exceed: a new pair is
// dropped while the hash is full): a shard past 3/4 of the cap is brought
// down to half, the least used pairs first (rt_trim.lua). Leader only; it
// returns how many pairs it removed. Without it the first RunTimePairs
// type names ever completed would hold the hash for good.
func (s *Maintainer) TrimRunTimes(ctx context.Context, f queue.Fence) (int, error) {
	removed := 0
	for shard := range s.Shards() {
		n, err := s.Client().HLen(ctx, queue.RunTimesKey(s.Prefix(shard))).Result()
		if err != nil {
			return removed, fmt.Errorf("queue: trim run times: %w", err)
		}
		if n <= int64(s.Options().RunTimePairs)*3/4 {
			continue
		}
		out, err := s.Run(ctx, s.Client(), queue.Scripts.RtTrim, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f), queue.RunTimesKey(s.Prefix(shard))),
			s.Clock(), f.Token, max(1, s.Options().RunTimePairs/2)).Slice()
		if err != nil {
			return removed, fmt.Errorf("queue: trim run times: %w", err)
		}
		if queue.Fenced(out) {
			return removed, queue.ErrFenced
		}
		removed += queue.ToInt(out[0])
	}
	return removed, nil
}

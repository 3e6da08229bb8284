package read

import (
	"context"
	"fmt"
	"sort"

	"github.com/ax-sched/ax/queue"
)

// SlowLaneStatus is a pool's slow lane now, summed over the shards: its
// slow tasks RUNNING and those parked until it has room.
func (s *Tasks) SlowLaneStatus(ctx context.Context, pool string) (queue.LimitState, error) {
	return s.keyStatus(ctx, "w:"+pool)
}

// SlowTypes are the types slow in pool's lane on any shard, sorted.
func (s *Tasks) SlowTypes(ctx context.Context, pool string) ([]string, error) {
	seen := map[string]bool{}
	for shard := range s.Shards() {
		ts, err := s.Client().HKeys(ctx, queue.SlowTypesKey(s.Prefix(shard), pool)).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: slow types: %w", err)
		}
		for _, t := range ts {
			seen[t] = true
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

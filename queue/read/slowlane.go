package read

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ax-sched/ax/queue"
)

// SlowLaneStatus is a pool's slow lane now, summed over the shards: its
// slow tasks RUNNING and those parked until it has room.
func (s *Tasks) SlowLaneStatus(ctx context.Context, pool string) (queue.LimitState, error) {
	return s.keyStatus(ctx, "w:"+pool)
}

// SlowTypes are the tenants' types slow in pool's lane on any shard,
// sorted by type, then tenant.
func (s *Tasks) SlowTypes(ctx context.Context, pool string) ([]queue.LaneType, error) {
	seen := map[queue.LaneType]bool{}
	for shard := range s.Shards() {
		ts, err := s.Client().HKeys(ctx, queue.SlowTypesKey(s.Prefix(shard), pool)).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: slow types: %w", err)
		}
		for _, f := range ts {
			// "<type> <tenant>" (lib.lua slow_type); a type alone is a
			// field of an older ax, never looked up
			if typ, tn, ok := strings.Cut(f, " "); ok {
				seen[queue.LaneType{Type: typ, Tenant: tn}] = true
			}
		}
	}
	out := make([]queue.LaneType, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Tenant < out[j].Tenant
	})
	return out, nil
}

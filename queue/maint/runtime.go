package maint

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ax-sched/ax/queue"
)

// TenantRunTimePairs is how many of a shard's cap of run-time triples
// (queue.Options.RunTimePairs) one tenant may hold: a quarter (lib.lua
// rt_tenant_cap applies the same), so no tenant fills the table for the
// others.
func TenantRunTimePairs(total int) int { return max(1, total/4) }

// TrimRunTimes keeps each shard's run-time hash well under its cap
// (Options.RunTimePairs) and each tenant's triples well under its share
// (TenantRunTimePairs), which the scripts never exceed: a new
// triple is dropped while the hash or its tenant's share is full. A shard
// past 3/4 of the cap, with a tenant past 3/4 of its share, or whose
// tenants' counts are missing (a hash of an older ax) is brought down to
// half of each, from the tenants holding the most, each tenant's least
// used first (rt_trim.lua): one tenant's flood of type names never pushes
// another tenant's triples out. Leader only; it returns how many triples
// it removed. Without it the first triples ever completed would hold the
// hash for good.
func (s *Maintainer) TrimRunTimes(ctx context.Context, f queue.Fence) (int, error) {
	removed := 0
	total := s.Options().RunTimePairs
	share := TenantRunTimePairs(total)
	for shard := range s.Shards() {
		p := s.Prefix(shard)
		pipe := s.Client().Pipeline()
		hlen := pipe.HLen(ctx, queue.RunTimesKey(p))
		tenants := pipe.HGetAll(ctx, queue.RunTimeTenantsKey(p))
		if _, err := pipe.Exec(ctx); err != nil {
			return removed, fmt.Errorf("queue: trim run times: %w", err)
		}
		n := hlen.Val()
		over := n > int64(total)*3/4 || (n > 0 && len(tenants.Val()) == 0)
		for _, v := range tenants.Val() {
			if c, _ := strconv.Atoi(v); c > share*3/4 {
				over = true
			}
		}
		if !over {
			continue
		}
		out, err := s.Run(ctx, s.Client(), queue.Scripts.RtTrim, s.KeysWith(shard, queue.FenceKey(p, f), queue.RunTimesKey(p), queue.RunTimeTenantsKey(p)),
			s.Clock(), f.Token, max(1, total/2), max(1, share/2)).Slice()
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

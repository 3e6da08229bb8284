package maint

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/ax-sched/ax/queue"
)

// SetPrices replaces the live price per slot-hour of the region's pools
// (leader only): what a claim records on each task it takes from a pool,
// instead of the claiming worker's configured price, so that a price
// override reaches per-task cost at once. A pool left out, or
// priced ≤ 0, gets the worker's price again.
func (s *Maintainer) SetPrices(ctx context.Context, f queue.Fence, prices map[string]float64) error {
	pools := make([]string, 0, len(prices))
	for p, v := range prices {
		if v > 0 {
			pools = append(pools, p)
		}
	}
	sort.Strings(pools)
	for shard := range s.Shards() {
		argv := make([]any, 0, 2+2*len(pools))
		argv = append(argv, s.Clock(), f.Token)
		for _, p := range pools {
			argv = append(argv, p, strconv.FormatFloat(prices[p], 'f', -1, 64))
		}
		out, err := s.Run(ctx, s.Client(), queue.Scripts.Prices, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f), queue.PricesKey(s.Prefix(shard))), argv...).Slice()
		if err != nil {
			return fmt.Errorf("queue: set prices: %w", err)
		}
		if queue.Fenced(out) {
			return queue.ErrFenced
		}
	}
	return nil
}

// Fence raises f's fence on every shard to f.Token, so from now on a leader
// with a lower token is refused on all of them (ErrFenced), whichever it
// writes to first. A new leader calls it before its first leader-only
// write; ErrFenced means a newer leader exists already.
func (s *Maintainer) Fence(ctx context.Context, f queue.Fence) error {
	for shard := range s.Shards() {
		out, err := s.Run(ctx, s.Client(), queue.Scripts.Fence, s.KeysWith(shard, queue.FenceKey(s.Prefix(shard), f)), s.Clock(), f.Token).Slice()
		if err != nil {
			return fmt.Errorf("queue: fence: %w", err)
		}
		if queue.Fenced(out) {
			return queue.ErrFenced
		}
	}
	return nil
}

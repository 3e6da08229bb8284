package read

import (
	"context"
	"fmt"

	"github.com/ax-sched/ax/queue"
	"github.com/redis/go-redis/v9"
)

// ColdWaiting counts the tasks in the cold tier, every shard's.
func (s *Tasks) ColdWaiting(ctx context.Context) (int, error) {
	total := 0
	for shard := range s.Shards() {
		v, err := s.Client().HGet(ctx, queue.CountsKey(s.Prefix(shard)), "cold").Int()
		if err != nil && err != redis.Nil {
			return 0, fmt.Errorf("queue: cold count: %w", err)
		}
		total += v
	}
	return total, nil
}

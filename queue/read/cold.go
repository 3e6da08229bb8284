package read

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ColdWaiting counts the tasks in the cold tier, every shard's.
func (s *Tasks) ColdWaiting(ctx context.Context) (int, error) {
	total := 0
	for shard := range s.Keys {
		v, err := s.RDB.HGet(ctx, s.Keys[shard].Base[5], "cold").Int()
		if err != nil && err != redis.Nil {
			return 0, fmt.Errorf("queue: cold count: %w", err)
		}
		total += v
	}
	return total, nil
}

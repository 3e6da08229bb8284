package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// popAny is one BLPOP over keys of one server. go-redis rounds BLPop's
// timeout to whole seconds; Redis ≥ 6 takes a decimal one. Sub-second waits
// are sent with Do, which does not know they block: they stay under the
// client's read timeout (5 s, go-redis v9's default, which ax keeps).
func (s *Engine) PopAny(ctx context.Context, keys []string, timeout time.Duration) (bool, error) {
	var err error
	if timeout%time.Second == 0 {
		err = s.rdb.BLPop(ctx, timeout, keys...).Err()
	} else {
		args := make([]any, 0, len(keys)+2)
		args = append(args, "BLPOP")
		for _, k := range keys {
			args = append(args, k)
		}
		args = append(args, strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64))
		err = s.rdb.Do(ctx, args...).Err()
	}
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("queue: wait for work: %w", err)
	}
	return true, nil
}

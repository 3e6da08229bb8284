package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Starving counts tasks that have waited longer than a threshold.
type Starving struct {
	// Ready[pool][priority]: READY tasks that became READY (or due) before
	// the threshold.
	Ready map[string][task.MaxPriority + 1]int
	// Unplaced: due tasks waiting for placement since before the threshold.
	Unplaced int
}

// Starving counts the tasks of pools waiting longer than threshold, from
// the scores of the sets they wait in, reading no task record: a ready
// set's score is when its task became READY (or due), the due set's when
// its task became due. One pipelined round trip of ZCOUNTs per shard, so
// the leader can afford it every few seconds. A task put back to PENDING
// for want of capacity (NO_CAPACITY) waits in the delayed set, by its next
// try, and is not counted.
func (s *Store) Starving(ctx context.Context, pools []string, threshold time.Duration) (Starving, error) {
	out := Starving{Ready: make(map[string][task.MaxPriority + 1]int, len(pools))}
	before := "(" + strconv.FormatInt(s.now().Add(-threshold).UnixMilli(), 10)
	for shard := range s.keys {
		p := s.keys[shard].prefix
		pipe := s.rdb.Pipeline()
		ready := make([][task.MaxPriority + 1]*redis.IntCmd, len(pools))
		for i, pool := range pools {
			for prio := 0; prio <= task.MaxPriority; prio++ {
				ready[i][prio] = pipe.ZCount(ctx, p+"q:"+pool+":"+strconv.Itoa(prio), "-inf", before)
			}
		}
		due := pipe.ZCount(ctx, s.keys[shard].base[2], "-inf", before)
		if _, err := pipe.Exec(ctx); err != nil {
			return Starving{}, fmt.Errorf("queue: starving: %w", err)
		}
		for i, pool := range pools {
			a := out.Ready[pool]
			for prio := range a {
				a[prio] += int(ready[i][prio].Val())
			}
			out.Ready[pool] = a
		}
		out.Unplaced += int(due.Val())
	}
	return out, nil
}

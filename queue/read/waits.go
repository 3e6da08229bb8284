package read

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/redis/go-redis/v9"
)

// Start is one claimed task's wait: from READY (or due) to the claim that
// started its attempt, by the Redis clock.
type Start struct {
	Pool string
	Wait time.Duration
}

// RecentStarts samples the waits of tasks claimed after the event stream
// ids in after (one per shard; "" or "$": from now on, as Events), at most
// max claim events per shard, and returns the ids to pass next time. A
// claim event names up to 8 of its tasks: those are the sample. A task
// whose record is gone, or lacks either time, is left out.
func (s *Tasks) RecentStarts(ctx context.Context, after []string, max int) ([]Start, []string, error) {
	evs, next, err := s.Events(ctx, after, max, 0)
	if err != nil {
		return nil, next, err
	}
	pipe := s.Client().Pipeline()
	var cmds []*redis.SliceCmd
	for _, e := range evs {
		if e.Op != "claim" {
			continue
		}
		for _, id := range e.Tasks {
			cmds = append(cmds, pipe.HMGet(ctx, queue.TaskKey(s.Prefix(e.Shard), id), "po", "rt", "sa"))
		}
	}
	if len(cmds) == 0 {
		return nil, next, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, next, fmt.Errorf("queue: recent starts: %w", err)
	}
	out := make([]Start, 0, len(cmds))
	for _, c := range cmds {
		v := c.Val()
		if len(v) != 3 || v[0] == nil || v[1] == nil || v[2] == nil {
			continue
		}
		ready, started := record.Atoi(fmt.Sprint(v[1])), record.Atoi(fmt.Sprint(v[2]))
		if ready <= 0 || started < ready {
			continue
		}
		out = append(out, Start{Pool: fmt.Sprint(v[0]), Wait: time.Duration(started-ready) * time.Millisecond})
	}
	return out, next, nil
}

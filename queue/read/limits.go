package read

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ax-sched/ax/queue"
)

// LimitStatus reads a limit key's state summed over the shards.
func (s *Tasks) LimitStatus(ctx context.Context, kind, name string) (queue.LimitState, error) {
	k, err := queue.KeyOfLimit(kind, name)
	if err != nil {
		return queue.LimitState{}, err
	}
	return s.keyStatus(ctx, k)
}

// PauseStatus reads the state of a retry after's pause: a tenant's tasks of
// a limit key, or of a task type (limitKey "").
func (s *Tasks) PauseStatus(ctx context.Context, tenant, limitKey, taskType string) (queue.LimitState, error) {
	if tenant == "" {
		tenant = "default"
	}
	k := "p:" + tenant + "|y:" + taskType
	if limitKey != "" {
		k = "p:" + tenant + "|k:" + limitKey
	}
	return s.keyStatus(ctx, k)
}

func (s *Tasks) keyStatus(ctx context.Context, k string) (queue.LimitState, error) {
	var st queue.LimitState
	for shard := range s.Shards() {
		p := s.Prefix(shard)
		pipe := s.Client().Pipeline()
		lc := pipe.HGet(ctx, queue.LimitRunningKey(p), k)
		pk := pipe.ZCard(ctx, queue.ParkedKey(p, k))
		lp := pipe.HGet(ctx, queue.LimitPausedKey(p), k)
		_, _ = pipe.Exec(ctx) // HGET of an absent field is redis.Nil: read each answer
		if err := pk.Err(); err != nil {
			return st, fmt.Errorf("queue: limit status: %w", err)
		}
		n, _ := strconv.Atoi(lc.Val())
		st.Running += n
		st.Parked += int(pk.Val())
		if u, _ := strconv.ParseInt(lp.Val(), 10, 64); u > 0 {
			if t := time.UnixMilli(u); t.After(st.PausedUntil) && t.After(s.Now()) {
				st.PausedUntil = t
			}
		}
	}
	return st, nil
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
	"strings"
	"time"
)

// coldBucket is the span of one cold time bucket.
const ColdBucket = 10 * time.Second

// coldChunk bounds one cold promotion script: a task costs it a record
// write, an index read and delete and a delayed-set entry (~10 µs on a busy
// 2-vCPU VM), so 100 keep a script near 1 ms; 500 made 18 ms scripts under
// load (docs/benchmarks.md).
const coldChunk = 100

func (s *Engine) ColdKeys(shard int, extra ...string) []string {
	p := s.Keys[shard].Prefix
	return s.KeysWith(shard, append([]string{p + "cold", p + "cseq"}, extra...)...)
}

// PromoteCold moves cold tasks whose bucket starts within half the cold
// horizon to the hot delayed sets, at most limit per shard and call
// (≤ MaxBatch), in scripts of at most coldChunk. It returns how many
// moved and the start of the earliest bucket left (zero when none).
// Leader only: fenced.
func (s *Maintainer) PromoteCold(ctx context.Context, f Fence, limit int) (int, time.Time, error) {
	limit = clampBatch(limit)
	lead := (s.Opts.ColdHorizon / 2).Milliseconds()
	moved := 0
	var next time.Time
	for shard := range s.Keys {
		for done := 0; done < limit; {
			n := min(coldChunk, limit-done)
			out, err := s.Run(ctx, s.RDB, Scripts.Cold, s.ColdKeys(shard, s.fenceKey(shard, f)),
				s.Clock(), "promote", f.Token, lead, n).Slice()
			if err != nil {
				return moved, next, fmt.Errorf("queue: promote cold: %w", err)
			}
			if fenced(out) {
				return moved, next, ErrFenced
			}
			m := ToInt(out[0])
			moved += m
			nb := msTime(ToStr(out[1]))
			if nb != nil && (next.IsZero() || nb.Before(next)) {
				next = *nb
			}
			seen := ToInt(out[2])
			if seen < n {
				break // no more ahead
			}
			done += seen
		}
	}
	return moved, next, nil
}

// thaw makes a cold task an ordinary delayed one; false when id is not in
// the cold tier.
func (s *Engine) thaw(ctx context.Context, id string) (bool, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return false, err
	}
	n, err := s.Run(ctx, s.RDB, Scripts.Cold, s.ColdKeys(shard), s.Clock(), "thaw", id).Int()
	if err != nil {
		return false, fmt.Errorf("queue: thaw: %w", err)
	}
	return n == 1, nil
}

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

// thawedOn reports whether err says id was not found and id was in the
// cold tier, now thawed: the caller tries again. A cold task is PENDING;
// every read and action sees it as the ordinary delayed task it becomes.
func (s *Engine) thawedOn(ctx context.Context, id string, err error) bool {
	if !errors.Is(err, task.ErrNotFound) {
		return false
	}
	ok, terr := s.thaw(ctx, id)
	return terr == nil && ok
}

// waitingCold is Waiting over one shard's cold tier: each index hash is
// read whole (a few hundred entries), each template once.
func (s *Engine) waitingCold(ctx context.Context, shard int, f Filter, fn func([]*task.Task) error) error {
	p := s.Keys[shard].Prefix
	idx, err := s.scanKeys(ctx, p+"cx:*")
	if err != nil {
		return err
	}
	tpls := map[string]map[string]string{}
	for _, k := range idx {
		kv, err := s.RDB.HGetAll(ctx, k).Result()
		if err != nil {
			return fmt.Errorf("queue: cold index: %w", err)
		}
		var keep []*task.Task
		for id, v := range kv {
			due, ref, ok := strings.Cut(v, " ")
			if !ok {
				continue
			}
			tpl, ok := tpls[ref]
			if !ok {
				if tpl, err = s.RDB.HGetAll(ctx, p+"cs:"+ref).Result(); err != nil {
					return fmt.Errorf("queue: cold template: %w", err)
				}
				tpls[ref] = tpl
			}
			t := s.coldTask(id, due, tpl)
			if f.match(t) {
				keep = append(keep, t)
			}
		}
		if len(keep) > 0 {
			if err := fn(keep); err != nil {
				return err
			}
		}
	}
	return nil
}

// coldTask is the task a cold index entry (due ms) and its template
// describe, as a read would see it.
func (s *Engine) coldTask(id, due string, tpl map[string]string) *task.Task {
	h := make(map[string]string, len(tpl)+3)
	for k, v := range tpl {
		if k != "#" {
			h[k] = v
		}
	}
	h["st"], h["rs"], h["du"] = "P", task.ReasonSubmitted, due
	t := decodeTask(id, h, s.Opts.Defaults)
	t.HeldBy = s.Opts.Region
	return t
}

// coldIDs are the ids in one shard's cold tier.
func (s *Engine) coldIDs(ctx context.Context, shard int, into map[string]bool) error {
	idx, err := s.scanKeys(ctx, s.Keys[shard].Prefix+"cx:*")
	if err != nil {
		return err
	}
	for _, k := range idx {
		ids, err := s.RDB.HKeys(ctx, k).Result()
		if err != nil {
			return fmt.Errorf("queue: cold index: %w", err)
		}
		for _, id := range ids {
			into[id] = true
		}
	}
	return nil
}

// readCold reads the tasks of one shard that are in its cold tier, without
// thawing them (a listing is no reason to); ids not there are left out.
func (s *Engine) readCold(ctx context.Context, shard int, ids []string) ([]*task.Task, error) {
	p := s.Keys[shard].Prefix
	pipe := s.RDB.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGet(ctx, p+"cx:"+id[13:16], id)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("queue: cold index: %w", err)
	}
	tpls := map[string]map[string]string{}
	var out []*task.Task
	for i, c := range cmds {
		due, ref, ok := strings.Cut(c.Val(), " ")
		if c.Err() != nil || !ok {
			continue
		}
		tpl, ok := tpls[ref]
		if !ok {
			var err error
			if tpl, err = s.RDB.HGetAll(ctx, p+"cs:"+ref).Result(); err != nil {
				return nil, fmt.Errorf("queue: cold template: %w", err)
			}
			tpls[ref] = tpl
		}
		out = append(out, s.coldTask(ids[i], due, tpl))
	}
	return out, nil
}

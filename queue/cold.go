package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// coldBucket is the span of one cold time bucket.
const ColdBucket = 10 * time.Second

// coldChunk bounds one cold promotion script: a task costs it a record
// write, an index read and delete and a delayed-set entry (~10 µs on a busy
// 2-vCPU VM), so 100 keep a script near 1 ms; 500 made 18 ms scripts under
// load (docs/benchmarks.md).
const ColdChunk = 100

func (s *Engine) ColdKeys(shard int, extra ...string) []string {
	p := s.Prefix(shard)
	return s.KeysWith(shard, append([]string{ColdKey(p), ColdSeqKey(p)}, extra...)...)
}

// thaw makes a cold task an ordinary delayed one; false when id is not in
// the cold tier.
func (s *Engine) thaw(ctx context.Context, id string) (bool, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return false, err
	}
	code, err := s.Run(ctx, s.rdb, Scripts.Cold, s.ColdKeys(shard), s.Clock(), "thaw", id).Int()
	if err != nil {
		return false, fmt.Errorf("queue: thaw: %w", err)
	}
	return code == CodeOK, nil
}

// thawedOn reports whether err says id was not found and id was in the
// cold tier, now thawed: the caller tries again. A cold task is PENDING;
// every read and action sees it as the ordinary delayed task it becomes.
func (s *Engine) ThawedOn(ctx context.Context, id string, err error) bool {
	if !errors.Is(err, task.ErrNotFound) {
		return false
	}
	ok, terr := s.thaw(ctx, id)
	return terr == nil && ok
}

// waitingCold is Waiting over one shard's cold tier: each index hash is
// read whole (a few hundred entries), each template once.
func (s *Engine) WaitingCold(ctx context.Context, shard int, f Filter, fn func([]*task.Task) error) error {
	p := s.Prefix(shard)
	idx, err := s.ScanKeys(ctx, ColdIndexPattern(p))
	if err != nil {
		return err
	}
	tpls := map[string]map[string]string{}
	for _, k := range idx {
		kv, err := s.rdb.HGetAll(ctx, k).Result()
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
				if tpl, err = s.rdb.HGetAll(ctx, ColdTemplateKey(p, ref)).Result(); err != nil {
					return fmt.Errorf("queue: cold template: %w", err)
				}
				tpls[ref] = tpl
			}
			t := coldTask(id, due, tpl, &s.opts)
			if f.Match(t) {
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
func coldTask(id, due string, tpl map[string]string, o *Options) *task.Task {
	h := make(map[string]string, len(tpl)+3)
	for k, v := range tpl {
		if k != "#" {
			h[k] = v
		}
	}
	h["st"], h["rs"], h["du"] = "P", task.ReasonSubmitted, due
	t := record.DecodeTask(id, h, o.Defaults)
	t.HeldBy = o.Region
	return t
}

// coldIDs are the ids in one shard's cold tier.
func (s *Engine) ColdIDs(ctx context.Context, shard int, into map[string]bool) error {
	idx, err := s.ScanKeys(ctx, ColdIndexPattern(s.Prefix(shard)))
	if err != nil {
		return err
	}
	for _, k := range idx {
		ids, err := s.rdb.HKeys(ctx, k).Result()
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
func (s *Engine) ReadCold(ctx context.Context, shard int, ids []string) ([]*task.Task, error) {
	p := s.Prefix(shard)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGet(ctx, ColdIndexKey(p, id), id)
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
			if tpl, err = s.rdb.HGetAll(ctx, ColdTemplateKey(p, ref)).Result(); err != nil {
				return nil, fmt.Errorf("queue: cold template: %w", err)
			}
			tpls[ref] = tpl
		}
		out = append(out, coldTask(ids[i], due, tpl, &s.opts))
	}
	return out, nil
}

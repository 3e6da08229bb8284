package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/task"
)

// The cold tier (scripts/cold.lua). A delayed task due later than
// Options.ColdHorizon waits without a record: its id in a time bucket of
// coldBucket and in an id-sharded index hash, its spec once per submit call
// in a template. That is ~100 B of Redis a task instead of ~430 B for a
// record and a delayed-set entry, so millions of far-off tasks fit, and no
// per-second scan touches them: the leader's PromoteCold moves whole
// buckets to the hot delayed sets half a horizon ahead of their time, in
// bounded batches, fenced. Any read or action on a cold task thaws it
// first (Get, Trails, Cancel, SetPriority, Replay): it becomes the
// ordinary delayed task it would have been, still PENDING, so every other
// path is unchanged.
//
// Only tasks with a generated id, no idempotency key, no hand-off and no
// carried history go cold: those are the ones whose every other reader
// finds them by id alone.

// coldBucket is the span of one cold time bucket.
const coldBucket = 10 * time.Second

// coldChunk bounds one cold promotion script: a task costs it a record
// write, an index read and delete and a delayed-set entry (~10 µs on a busy
// 2-vCPU VM), so 100 keep a script near 1 ms; 500 made 18 ms scripts under
// load (docs/benchmarks.md).
const coldChunk = 100

func (s *engine) coldKeys(shard int, extra ...string) []string {
	p := s.keys[shard].prefix
	return s.keysWith(shard, append([]string{p + "cold", p + "cseq"}, extra...)...)
}

// coldEligible reports whether the task goes to the cold tier.
func (s *Submitter) coldEligible(t NewTask, now time.Time) bool {
	sp := t.Spec
	return s.opts.ColdHorizon > 0 && t.ID == "" && sp.RunAt != nil && !sp.RunAt.Before(now.Add(s.opts.ColdHorizon)) &&
		sp.IdempotencyKey == "" && t.HandOff == "" && t.History == nil && !t.Returning
}

// splitCold takes the cold tasks out of idx.
func (s *Submitter) splitCold(tasks []NewTask, idx []int) (cold, hot []int) {
	if s.opts.ColdHorizon <= 0 {
		return nil, idx
	}
	now := s.now()
	for _, i := range idx {
		if s.coldEligible(tasks[i], now) {
			cold = append(cold, i)
		} else {
			hot = append(hot, i)
		}
	}
	return cold, hot
}

// submitCold stores tasks idx of one shard in the cold tier, one template
// per distinct (spec, pool, pinned) in the call.
func (s *Submitter) submitCold(ctx context.Context, sc redis.Scripter, shard int, tasks []NewTask, ids []string, idx []int, res []SubmitResult) error {
	// Templates are told apart by content: tasks of one call usually differ
	// only in their due time (one spec each, the same fields).
	type ptrKey struct {
		sp     *task.Spec
		pool   string
		pinned bool
	}
	byPtr := map[ptrKey]int{}
	byText := map[string]int{}
	var specs []any
	refs := make([]int, len(idx))
	var b strings.Builder
	for k, i := range idx {
		t := tasks[i]
		pk := ptrKey{t.Spec, t.Pool, t.Pinned && t.Pool != ""}
		ref, ok := byPtr[pk]
		if !ok {
			f := specFields(t.Spec, s.opts.Defaults)
			if pk.pinned {
				f = append(f, "pn", "1", "po", t.Pool)
			}
			f = append(f, "pr", strconv.Itoa(*t.Spec.Priority))
			b.Reset()
			for _, v := range f {
				b.WriteString(v.(string))
				b.WriteByte(0)
			}
			if ref, ok = byText[b.String()]; !ok {
				specs = append(specs, len(f)/2)
				specs = append(specs, f...)
				ref = len(byText) + 1
				byText[b.String()] = ref
			}
			byPtr[pk] = ref
		}
		refs[k] = ref
	}
	argv := make([]any, 0, 4+len(specs)+1+3*len(idx))
	argv = append(argv, s.clock(), "submit", coldBucket.Milliseconds(), len(byText))
	argv = append(argv, specs...)
	argv = append(argv, len(idx))
	for k, i := range idx {
		argv = append(argv, ids[i], refs[k], tasks[i].Spec.RunAt.UnixMilli())
	}
	argv = append(argv, s.backlogCaps(tasks, idx))
	codes, err := s.run(ctx, sc, scripts.cold, s.coldKeys(shard), argv...).Text()
	if err != nil {
		return fmt.Errorf("queue: submit (cold): %w", err)
	}
	if len(codes) != len(idx) {
		return fmt.Errorf("queue: submit (cold): %d results for %d tasks", len(codes), len(idx))
	}
	for k, i := range idx {
		r := SubmitResult{ID: ids[i], State: task.Pending}
		switch codes[k] {
		case '3':
			r.Err = task.ErrExists
		case '5':
			r = SubmitResult{ID: ids[i], Err: ErrBacklogFull}
		}
		res[i] = r
	}
	return nil
}

// PromoteCold moves cold tasks whose bucket starts within half the cold
// horizon to the hot delayed sets, at most limit per shard and call
// (≤ MaxBatch), in scripts of at most coldChunk. It returns how many
// moved and the start of the earliest bucket left (zero when none).
// Leader only: fenced.
func (s *Maintainer) PromoteCold(ctx context.Context, f Fence, limit int) (int, time.Time, error) {
	limit = clampBatch(limit)
	lead := (s.opts.ColdHorizon / 2).Milliseconds()
	moved := 0
	var next time.Time
	for shard := range s.keys {
		for done := 0; done < limit; {
			n := min(coldChunk, limit-done)
			out, err := s.run(ctx, s.rdb, scripts.cold, s.coldKeys(shard, s.fenceKey(shard, f)),
				s.clock(), "promote", f.Token, lead, n).Slice()
			if err != nil {
				return moved, next, fmt.Errorf("queue: promote cold: %w", err)
			}
			if fenced(out) {
				return moved, next, ErrFenced
			}
			m := toInt(out[0])
			moved += m
			nb := msTime(toStr(out[1]))
			if nb != nil && (next.IsZero() || nb.Before(next)) {
				next = *nb
			}
			seen := toInt(out[2])
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
func (s *engine) thaw(ctx context.Context, id string) (bool, error) {
	shard, err := s.shardOf(id)
	if err != nil {
		return false, err
	}
	n, err := s.run(ctx, s.rdb, scripts.cold, s.coldKeys(shard), s.clock(), "thaw", id).Int()
	if err != nil {
		return false, fmt.Errorf("queue: thaw: %w", err)
	}
	return n == 1, nil
}

// ColdWaiting counts the tasks in the cold tier, every shard's.
func (s *Tasks) ColdWaiting(ctx context.Context) (int, error) {
	total := 0
	for shard := range s.keys {
		v, err := s.rdb.HGet(ctx, s.keys[shard].base[5], "cold").Int()
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
func (s *engine) thawedOn(ctx context.Context, id string, err error) bool {
	if !errors.Is(err, task.ErrNotFound) {
		return false
	}
	ok, terr := s.thaw(ctx, id)
	return terr == nil && ok
}

// waitingCold is Waiting over one shard's cold tier: each index hash is
// read whole (a few hundred entries), each template once.
func (s *engine) waitingCold(ctx context.Context, shard int, f Filter, fn func([]*task.Task) error) error {
	p := s.keys[shard].prefix
	idx, err := s.scanKeys(ctx, p+"cx:*")
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
				if tpl, err = s.rdb.HGetAll(ctx, p+"cs:"+ref).Result(); err != nil {
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
func (s *engine) coldTask(id, due string, tpl map[string]string) *task.Task {
	h := make(map[string]string, len(tpl)+3)
	for k, v := range tpl {
		if k != "#" {
			h[k] = v
		}
	}
	h["st"], h["rs"], h["du"] = "P", task.ReasonSubmitted, due
	t := decodeTask(id, h, s.opts.Defaults)
	t.HeldBy = s.opts.Region
	return t
}

// coldIDs are the ids in one shard's cold tier.
func (s *engine) coldIDs(ctx context.Context, shard int, into map[string]bool) error {
	idx, err := s.scanKeys(ctx, s.keys[shard].prefix+"cx:*")
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
func (s *engine) readCold(ctx context.Context, shard int, ids []string) ([]*task.Task, error) {
	p := s.keys[shard].prefix
	pipe := s.rdb.Pipeline()
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
			if tpl, err = s.rdb.HGetAll(ctx, p+"cs:"+ref).Result(); err != nil {
				return nil, fmt.Errorf("queue: cold template: %w", err)
			}
			tpls[ref] = tpl
		}
		out = append(out, s.coldTask(ids[i], due, tpl))
	}
	return out, nil
}

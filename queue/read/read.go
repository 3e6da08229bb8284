package read

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Trail returns a task's transitions, oldest first. The happy path is
// rebuilt from the record's timestamps; abnormal steps come from its log.
func (s *Tasks) Trail(ctx context.Context, id string) ([]task.Transition, error) {
	trs, err := s.Trails(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	tr, ok := trs[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", task.ErrNotFound, id)
	}
	return tr, nil
}

// Trails reads the trails of many tasks in one pipelined round trip (the
// outbox sends them with the tasks it hands off; Trail is Trails of one).
// Ids not found are left out.
func (s *Tasks) Trails(ctx context.Context, ids []string) (map[string][]task.Transition, error) {
	type reads struct {
		h *redis.MapStringStringCmd
		l *redis.StringSliceCmd
	}
	rs := make([]reads, len(ids))
	pipe := s.Client().Pipeline()
	for i, id := range ids {
		shard, err := s.ShardOf(id)
		if err != nil {
			return nil, err
		}
		p := s.Prefix(shard)
		rs[i] = reads{pipe.HGetAll(ctx, queue.TaskKey(p, id)), pipe.LRange(ctx, queue.TrailKey(p, id), 0, -1)}
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("queue: trails: %w", err)
		}
	}
	// Pinned delayed tasks may be READY by structure (see resolveLazy): the
	// trail shows that step.
	lazy := map[int][]*task.Task{}
	hs := make([]map[string]string, len(ids))
	for i, id := range ids {
		if hs[i] = rs[i].h.Val(); len(hs[i]) > 0 {
			if t := record.DecodeTask(id, hs[i], s.Options().Defaults); queue.MayBeLazy(t) {
				shard, _ := s.ShardOf(id)
				lazy[shard] = append(lazy[shard], t)
			}
		}
	}
	ready := map[string]bool{}
	for shard, ts := range lazy {
		if err := s.ResolveLazy(ctx, shard, ts); err != nil {
			return nil, err
		}
		for _, t := range ts {
			ready[t.ID] = t.State == task.Ready
		}
	}
	out := make(map[string][]task.Transition, len(ids))
	var thawed []string
	for i, id := range ids {
		h := hs[i]
		if len(h) == 0 {
			if s.ThawedOn(ctx, id, task.ErrNotFound) {
				thawed = append(thawed, id)
			}
			continue
		}
		if ready[id] {
			h["st"], h["rs"], h["rt"] = "R", task.ReasonDue, h["du"]
		}
		out[id] = buildTrail(h, rs[i].l.Val(), s.Options().Region)
	}
	if len(thawed) > 0 {
		more, err := s.Trails(ctx, thawed)
		if err != nil {
			return nil, err
		}
		for id, tr := range more {
			out[id] = tr
		}
	}
	return out, nil
}

// buildTrail merges the record's happy steps with its trail list; steps
// without a region of their own (this region's) get region.
func buildTrail(h map[string]string, log []string, region string) []task.Transition {
	var tr []task.Transition
	at := func(s string) time.Time {
		if t := record.MsTime(s); t != nil {
			return *t
		}
		return time.Time{}
	}
	attempt := record.Atoi(h["at"])
	born := task.Pending
	bornReason := task.ReasonSubmitted
	if h["rt"] != "" && h["rt"] == h["ct"] && len(log) == 0 {
		born, bornReason = task.Ready, task.ReasonPlaced
	}
	// A task placed at submit whose READY step was flushed to the log has
	// its birth there ("" → READY PLACED).
	// A task received from another region brought its birth in its trail.
	if h["hx"] == "" && (len(log) == 0 || !strings.HasPrefix(log[0], h["ct"]+"\t\t")) {
		tr = append(tr, task.Transition{At: at(h["ct"]), To: born, Reason: bornReason, By: "api", Region: region})
	}
	for _, line := range log {
		f := strings.SplitN(line, "\t", 8)
		if len(f) < 7 {
			continue
		}
		ts, _ := strconv.ParseInt(f[0], 10, 64)
		r := region
		if len(f) == 8 && f[7] != "" {
			r = f[7] // a step carried from the region that recorded it
		}
		tr = append(tr, task.Transition{
			At: time.UnixMilli(ts).UTC(), From: record.StateOf(f[1]), To: record.StateOf(f[2]), Reason: f[3],
			By: f[4], Attempt: record.Atoi(f[5]), Error: f[6], Region: r,
		})
	}
	st := record.StateOf(h["st"])
	// Steps of the current attempt not yet flushed to the log.
	// (A task received READY has that step logged as RECEIVED, a held one
	// released READY as COMMITTED: hx is then its rt.)
	if rt := h["rt"]; rt != "" && born != task.Ready && rt != h["hx"] {
		tr = append(tr, task.Transition{At: at(rt), From: task.Pending, To: task.Ready, Reason: readyReason(h), Attempt: attempt, Region: region})
	}
	if st == task.Running || st == task.Success {
		tr = append(tr, task.Transition{At: at(h["sa"]), From: task.Ready, To: task.Running, Reason: task.ReasonClaimed, By: h["wk"], Attempt: attempt, Region: region})
	}
	if st == task.Success {
		tr = append(tr, task.Transition{At: at(h["fa"]), From: task.Running, To: task.Success, Reason: task.ReasonCompleted, By: h["wk"], Attempt: attempt, Region: region})
	}
	sort.SliceStable(tr, func(i, j int) bool { return tr[i].At.Before(tr[j].At) })
	return tr
}

func readyReason(h map[string]string) string {
	switch h["rs"] {
	case task.ReasonPlaced, task.ReasonDue:
		return h["rs"]
	case "":
		return task.ReasonPlaced
	}
	return task.ReasonDue
}

// Counts reads every counter of every shard (one HGETALL per shard).
func (s *Tasks) Counts(ctx context.Context) (*queue.Counts, error) {
	c := &queue.Counts{ReadyBy: map[string][task.MaxPriority + 1]int{}, RunningBy: map[string]int{}, MilliBy: map[string]int{},
		ParkedBy: map[string]int{}, LimitedBy: map[string]map[string]int{}}
	gap := map[string]int{}
	for shard := range s.Shards() {
		h, err := s.Client().HGetAll(ctx, queue.CountsKey(s.Prefix(shard))).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: counts: %w", err)
		}
		for k, v := range h {
			n := record.Atoi(v)
			switch {
			case k == "P":
				c.Pending += n
			case k == "hd":
				c.Held += n
			case k == "R":
				c.Ready += n
			case k == "U":
				c.Running += n
			case k == "F":
				c.Dead += n
			case k == "tS":
				c.Succeeded += n
			case k == "tC":
				c.Canceled += n
			case k == "tF":
				c.Failed += n
			case k == "fst":
				c.FairStale += n
			case strings.HasPrefix(k, "u:"):
				c.RunningBy[k[2:]] += n
			case strings.HasPrefix(k, "uf:"):
				// the milli-slots fractional tasks leave free of whole slots
				gap[k[3:]] += n
			case strings.HasPrefix(k, "pk:"):
				c.ParkedBy[k[3:]] += n
			case strings.HasPrefix(k, "lim:"):
				if kind, pool, ok := strings.Cut(k[4:], ":"); ok {
					if c.LimitedBy[pool] == nil {
						c.LimitedBy[pool] = map[string]int{}
					}
					c.LimitedBy[pool][kind] += n
				}
			case strings.HasPrefix(k, "r:"):
				i := strings.LastIndexByte(k, ':')
				p := record.Atoi(k[i+1:])
				if i > 2 && p >= 0 && p <= task.MaxPriority {
					a := c.ReadyBy[k[2:i]]
					a[p] += n
					c.ReadyBy[k[2:i]] = a
				}
			}
		}
	}
	for pool, n := range c.RunningBy {
		c.MilliBy[pool] = max(0, n*task.MilliSlots-max(0, gap[pool]))
	}
	return c, nil
}

// DeadLetters lists FAILED tasks, newest first, from offset.
func (s *Tasks) DeadLetters(ctx context.Context, offset, limit int) ([]*task.Task, error) {
	limit = queue.ClampBatch(limit)
	offset = max(offset, 0)
	// Each shard's newest offset+limit, merged newest first (then by id,
	// descending): the page is the same whatever the shard count.
	type entry struct {
		id    string
		at    float64
		shard int
	}
	var all []entry
	for shard := range s.Shards() {
		zs, err := s.Client().ZRevRangeWithScores(ctx, queue.DeadKey(s.Prefix(shard)), 0, int64(offset+limit-1)).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: dead letters: %w", err)
		}
		for _, z := range zs {
			id, _ := z.Member.(string)
			all = append(all, entry{id, z.Score, shard})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].at != all[j].at {
			return all[i].at > all[j].at
		}
		return all[i].id > all[j].id
	})
	if offset >= len(all) {
		return nil, nil
	}
	page := all[offset:min(offset+limit, len(all))]
	byShard := make([][]string, s.Shards())
	for _, e := range page {
		byShard[e.shard] = append(byShard[e.shard], e.id)
	}
	got := make(map[string]*task.Task, len(page))
	for shard, ids := range byShard {
		ts, err := s.GetMany(ctx, shard, ids)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			got[t.ID] = t
		}
	}
	out := make([]*task.Task, 0, len(page))
	for _, e := range page {
		if t := got[e.id]; t != nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// Events reads entries after the given stream ids (one per shard, "$" or ""
// for only new ones, "0" for all kept), blocking up to block (0: don't).
// The returned ids continue each shard's stream where this read ended; a
// "$" becomes the stream's latest id, so nothing written between two calls
// is missed.
func (s *Tasks) Events(ctx context.Context, after []string, count int, block time.Duration) ([]task.Event, []string, error) {
	next := make([]string, s.Shards())
	for i := range s.Shards() {
		next[i] = "$"
		if i < len(after) && after[i] != "" {
			next[i] = after[i]
		}
	}
	if err := s.resolveLatest(ctx, next); err != nil {
		return nil, next, err
	}
	if s.OneNode() {
		streams := make([]string, 0, 2*s.Shards())
		for i := range s.Shards() {
			streams = append(streams, queue.EventsKey(s.Prefix(i)))
		}
		args := &redis.XReadArgs{Streams: append(streams, next...), Count: int64(count), Block: block}
		rdb := s.Client()
		if block <= 0 {
			args.Block = -1
		} else if s.Options().Blocking != nil {
			rdb = s.Options().Blocking
		}
		res, err := rdb.XRead(ctx, args).Result()
		if err != nil && err != redis.Nil {
			return nil, next, fmt.Errorf("queue: events: %w", err)
		}
		var out []task.Event
		for _, st := range res {
			for shard := range s.Shards() {
				if queue.EventsKey(s.Prefix(shard)) == st.Stream {
					out = s.appendEvents(out, next, shard, st.Messages)
				}
			}
		}
		return out, next, nil
	}
	// A cluster: one XREAD per shard (its stream's slot), all at once in
	// one pipeline, then, when none had anything, one blocking XREAD per
	// shard on connections of their own until the first answers.
	res := make([][]redis.XMessage, s.Shards())
	pipe := s.Client().Pipeline()
	cmds := make([]*redis.XStreamSliceCmd, s.Shards())
	for i := range s.Shards() {
		cmds[i] = pipe.XRead(ctx, &redis.XReadArgs{Streams: []string{queue.EventsKey(s.Prefix(i)), next[i]}, Count: int64(count), Block: -1})
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, next, fmt.Errorf("queue: events: %w", err)
	}
	found := false
	for i, c := range cmds {
		if st := c.Val(); len(st) > 0 {
			res[i], found = st[0].Messages, true
		}
	}
	if !found && block > 0 {
		err := s.BlockEach(ctx, s.Shards(), func(ctx context.Context, c *redis.Conn, shard int) (bool, error) {
			st, err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{queue.EventsKey(s.Prefix(shard)), next[shard]},
				Count: int64(count), Block: block}).Result()
			if err == redis.Nil || err == nil && len(st) == 0 {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			res[shard] = st[0].Messages
			return true, nil
		})
		if err != nil {
			return nil, next, fmt.Errorf("queue: events: %w", err)
		}
	}
	var out []task.Event
	for shard, ms := range res {
		out = s.appendEvents(out, next, shard, ms)
	}
	return out, next, nil
}

// resolveLatest replaces each "$" in ids with its shard's latest stream
// entry id ("0-0" for an empty stream), in one pipeline.
func (s *Tasks) resolveLatest(ctx context.Context, ids []string) error {
	pipe := s.Client().Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(ids))
	for i, id := range ids {
		if id == "$" {
			cmds[i] = pipe.XRevRangeN(ctx, queue.EventsKey(s.Prefix(i)), "+", "-", 1)
		}
	}
	if pipe.Len() == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return fmt.Errorf("queue: events: %w", err)
	}
	for i, c := range cmds {
		if c == nil {
			continue
		}
		ids[i] = "0-0"
		if ms := c.Val(); len(ms) > 0 {
			ids[i] = ms[0].ID
		}
	}
	return nil
}

// appendEvents decodes one shard's stream entries and moves its cursor.
func (s *Tasks) appendEvents(out []task.Event, next []string, shard int, ms []redis.XMessage) []task.Event {
	for _, m := range ms {
		e := task.Event{ID: m.ID, Shard: shard, Op: fmt.Sprint(m.Values["op"]), N: record.Atoi(fmt.Sprint(m.Values["n"]))}
		if ids := fmt.Sprint(m.Values["ids"]); ids != "" {
			e.Tasks = strings.Split(ids, ",")
		}
		out = append(out, e)
		next[shard] = m.ID
	}
	return out
}

// LiveSlots reads a pool's live workers and slots without changing
// anything: workers whose last heartbeat is within maxAge.
func (s *Tasks) LiveSlots(ctx context.Context, pool string, maxAge time.Duration) (workers, slots int, err error) {
	p := s.Prefix(0)
	min := strconv.FormatInt(s.Now().Add(-maxAge).UnixMilli(), 10)
	ws, err := s.Client().ZRangeByScore(ctx, queue.WorkersKey(p, pool), &redis.ZRangeBy{Min: min, Max: "+inf"}).Result()
	if err != nil || len(ws) == 0 {
		return 0, 0, err
	}
	vals, err := s.Client().HMGet(ctx, queue.SlotsKey(p, pool), ws...).Result()
	if err != nil {
		return 0, 0, err
	}
	for _, v := range vals {
		if v != nil {
			slots += record.Atoi(fmt.Sprint(v))
		}
	}
	return len(ws), slots, nil
}

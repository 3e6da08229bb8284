package read

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// listRead is how many records List reads in one pipeline.
const listRead = 200

// List returns this region's tasks that match q, newest first (ids sort by
// the time they were made, then by sequence: descending id order), at most
// q.Limit, and whether more follow.
//
// It reads the ids of the structure that holds the state asked for (the
// ready sets of one pool, the running set, the dead set, the delayed
// sets and the cold tier's index), or, for the states no set holds (SUCCESS, CANCELED, HANDED_OFF)
// and for no state, SCANs the shard's task records (never KEYS). Ids come
// without their records, so the order and the cursor cost no reads;
// records are then read newest first, listRead per pipeline, only until
// the page is full. Cold tasks are read from their index entry and
// template, not thawed. An operator path: O(ids in the structure) per page.
func (s *Tasks) List(ctx context.Context, q queue.ListQuery) ([]*task.Task, bool, error) {
	q.Limit = min(max(q.Limit, 1), queue.MaxList)
	type entry struct {
		id    string
		shard int
	}
	var ids []entry
	for shard := range s.Shards() {
		got, err := s.listIDs(ctx, shard, q)
		if err != nil {
			return nil, false, err
		}
		for id := range got {
			if q.Before == "" || id < q.Before {
				ids = append(ids, entry{id, shard})
			}
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].id > ids[j].id })
	out := []*task.Task{}
	for start := 0; start < len(ids); start += listRead {
		chunk := ids[start:min(start+listRead, len(ids))]
		byShard := map[int][]string{}
		for _, e := range chunk {
			byShard[e.shard] = append(byShard[e.shard], e.id)
		}
		got := make(map[string]*task.Task, len(chunk))
		for shard, sids := range byShard {
			ts, err := s.GetMany(ctx, shard, sids)
			if err != nil {
				return nil, false, err
			}
			var cold []string // no record: a cold task, or gone
			for _, t := range ts {
				got[t.ID] = t
			}
			for _, id := range sids {
				if got[id] == nil && len(id) >= 16 {
					cold = append(cold, id)
				}
			}
			if q.State == "" || q.State == task.Pending {
				if ts, err = s.ReadCold(ctx, shard, cold); err != nil {
					return nil, false, err
				}
				for _, t := range ts {
					got[t.ID] = t
				}
			}
		}
		for _, e := range chunk {
			t := got[e.id] // missing: expired or swept since its id was read
			if t == nil || !q.Matches(t) {
				continue
			}
			if len(out) == q.Limit {
				return out, true, nil
			}
			out = append(out, t)
		}
	}
	return out, false, nil
}

// listIDs are the ids of one shard that may hold tasks of q's state.
func (s *Tasks) listIDs(ctx context.Context, shard int, q queue.ListQuery) (map[string]bool, error) {
	p := s.Prefix(shard)
	var sets []string
	cold := false // the cold tier's ids too (delayed tasks far off, no record)
	switch q.State {
	case task.Ready:
		// Pinned delayed tasks promoted untouched are in the ready sets
		// (their records still say PENDING; reads resolve them).
		match := queue.ReadyPattern(p, "*")
		if q.Pool != "" {
			match = queue.ReadyPattern(p, globEscape(q.Pool))
		}
		qs, err := s.ScanKeys(ctx, match)
		if err != nil {
			return nil, err
		}
		// READY tasks a limit parked wait in their key's set (limits.go).
		pks, err := s.ScanKeys(ctx, queue.ParkedPattern(p))
		if err != nil {
			return nil, err
		}
		sets = append(qs, pks...)
	case task.Pending:
		ds, err := s.ScanKeys(ctx, queue.PinnedDelayedPattern(p))
		if err != nil {
			return nil, err
		}
		sets = append([]string{queue.DelayedKey(p), queue.DelayedUnplacedKey(p), queue.DueKey(p)}, ds...)
		cold = true
	case task.Running:
		sets = []string{queue.RunningKey(p)}
	case task.Failed:
		sets = []string{queue.DeadKey(p)}
	default:
		keys, err := s.ScanKeys(ctx, queue.TaskPattern(p))
		if err != nil {
			return nil, err
		}
		ids := make(map[string]bool, len(keys))
		for _, k := range keys {
			ids[queue.TaskID(p, k)] = true
		}
		return ids, s.ColdIDs(ctx, shard, ids)
	}
	ids := map[string]bool{}
	if cold {
		if err := s.ColdIDs(ctx, shard, ids); err != nil {
			return nil, err
		}
	}
	for _, set := range sets {
		var cursor uint64
		for {
			kv, next, err := s.Client().ZScan(ctx, set, cursor, "", 1000).Result()
			if err != nil {
				return nil, fmt.Errorf("queue: zscan: %w", err)
			}
			for i := 0; i < len(kv); i += 2 {
				if !strings.HasPrefix(kv[i], "~") { // a marker of a pinned delayed set
					ids[kv[i]] = true
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return ids, nil
}

// globEscape quotes the characters SCAN's MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

package submit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Submit accepts tasks, at most MaxBatch per Redis call. Results are in
// input order. The error is for Redis failures; per-task outcomes are in
// the results.
//
// A new task without an id or an idempotency key may go to any shard: when
// its shard's Redis refuses the call unsent (NotSent: on a Redis Cluster,
// the ax server's gate of a master its probe has not heard from), it gets a
// new id naming the next shard and is submitted there, and so on until one
// takes it or every shard has refused (that error). Only an unsent call is
// made again elsewhere: after any other error the script may have run, and
// a second shard would hold the task twice. A task with an id (a hand-off,
// a DAG node, a schedule's slot) or an idempotency key stays on its shard
// and shares its error: the id names the shard, and a key is found only on
// the shard ShardForKey names (a retry of the same key must meet the task
// the first try stored, not store another on a shard nobody looks at).
func (s *Submitter) Submit(ctx context.Context, tasks ...queue.NewTask) ([]queue.SubmitResult, error) {
	res := make([]queue.SubmitResult, len(tasks))
	byShard := make([][]int, s.Shards())
	now := s.Now()
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		var shard int
		switch {
		case t.ID != "":
			p, err := task.ParseID(t.ID)
			if err != nil {
				return nil, err
			}
			shard = p.Shard % s.Shards()
		case t.Spec.IdempotencyKey != "" || t.Spec.UniqueKey != "" || t.Spec.DebounceKey != "":
			key, _ := t.Spec.Key()
			shard = s.ShardForKey(t.Spec.Tenant, key)
		default:
			shard = s.NextShard()
		}
		ids[i] = t.ID
		if ids[i] == "" {
			ids[i] = s.Options().IDs.New(s.Options().Region, shard, now)
		}
		byShard[shard] = append(byShard[shard], i)
	}
	var refused []bool // shards that refused this call's tasks unsent
	for more := true; more; {
		more = false
		for shard, idx := range byShard {
			if len(idx) == 0 {
				continue
			}
			byShard[shard] = nil
			unsent, err := s.submitOn(ctx, shard, tasks, ids, idx, res)
			if err == nil {
				continue
			}
			if !queue.NotSent(err) {
				return nil, err
			}
			if refused == nil {
				refused = make([]bool, s.Shards())
			}
			refused[shard] = true
			to := -1
			for k := 1; k < s.Shards() && to < 0; k++ {
				if n := (shard + k) % s.Shards(); !refused[n] {
					to = n
				}
			}
			for _, i := range unsent {
				if key, _ := tasks[i].Spec.Key(); to < 0 || tasks[i].ID != "" || key != "" {
					return nil, err
				}
			}
			for _, i := range unsent {
				ids[i] = s.Options().IDs.New(s.Options().Region, to, s.Now())
				byShard[to] = append(byShard[to], i)
			}
			more = true
		}
	}
	return res, nil
}

// submitOn submits tasks idx on shard. On an error that NotSent reports,
// unsent are those of idx it did not store (the others' results are set).
func (s *Submitter) submitOn(ctx context.Context, shard int, tasks []queue.NewTask, ids []string, idx []int, res []queue.SubmitResult) (unsent []int, err error) {
	var sc redis.Scripter = s.Client()
	if s.Options().WaitReplicas > 0 {
		// WAIT counts the replicas that have this connection's writes:
		// the scripts and the WAIT must share one connection (of a
		// pool, WAIT would answer for another connection's, maybe none).
		c, err := s.Conn(ctx, shard)
		if err != nil {
			return idx, fmt.Errorf("queue: submit: %w", err)
		}
		defer c.Close()
		sc = c
	}
	stored := false // on sc: with WaitReplicas, a WAIT is owed
	fail := func(rest, later []int, err error) ([]int, error) {
		if !queue.NotSent(err) {
			return nil, err
		}
		if stored && s.Options().WaitReplicas > 0 {
			// The tasks stored on this connection are owed a WAIT that
			// this Redis refuses too: they may be lost in a failover.
			return nil, fmt.Errorf("%w: submit: shard %d stored tasks, then refused the call: %v", queue.ErrUnavailable, shard, err)
		}
		return append(append([]int(nil), rest...), later...), err
	}
	for start := 0; start < len(idx); start += queue.MaxBatch {
		end := min(start+queue.MaxBatch, len(idx))
		chunk := idx[start:end]
		if rest, err := s.submitShard(ctx, sc, shard, tasks, ids, chunk, res); err != nil {
			stored = stored || len(rest) < len(chunk)
			return fail(rest, idx[end:], err)
		}
		stored = true
		// A generated id another process generated too (same millisecond
		// and sequence: rare, but possible with many servers) was not
		// stored: give those tasks new ids and try again.
		for round := 0; round < 5; round++ {
			var again []int
			for _, i := range chunk {
				if tasks[i].ID == "" && errors.Is(res[i].Err, task.ErrExists) {
					ids[i] = s.Options().IDs.New(s.Options().Region, shard, s.Now())
					again = append(again, i)
				}
			}
			if len(again) == 0 {
				break
			}
			if rest, err := s.submitShard(ctx, sc, shard, tasks, ids, again, res); err != nil {
				return fail(rest, idx[end:], err)
			}
		}
	}
	if c, ok := sc.(*redis.Conn); ok {
		n, err := c.Wait(ctx, s.Options().WaitReplicas, s.Options().WaitTimeout).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: submit: wait for replicas: %w", err)
		}
		if int(n) < s.Options().WaitReplicas {
			return nil, fmt.Errorf("%w: submit: only %d of %d replicas acknowledged", queue.ErrUnavailable, n, s.Options().WaitReplicas)
		}
	}
	return nil, nil
}

// submitShard submits tasks idx (at most MaxBatch) on shard in one call
// (two when some go to the cold tier: those first). On an error, unsent are
// those of idx not stored when NotSent(err), the results of the others set.
// A small call over the pooled client goes in a group with others (commit.go).
func (s *Submitter) submitShard(ctx context.Context, sc redis.Scripter, shard int, tasks []queue.NewTask, ids []string, idx []int, res []queue.SubmitResult) (unsent []int, err error) {
	if cold, hot := s.splitCold(tasks, idx); len(cold) > 0 {
		if err := s.submitCold(ctx, sc, shard, tasks, ids, cold, res); err != nil || len(hot) == 0 {
			return idx, err
		}
		idx = hot
	}
	if len(idx) <= groupSolo && s.group != nil && sc == redis.Scripter(s.Client()) {
		return s.group.submit(ctx, s, shard, tasks, ids, idx, res)
	}
	return s.runShard(ctx, sc, shard, tasks, ids, idx, res)
}

// ErrBudget: a NewTask.Budget does not fit in its tenant's budget ledger
// in its shard (or there is none yet): nothing was stored.
var ErrBudget = errors.New("queue: the task's estimated cost is past its tenant's budget share")

// flagsOf is submit.lua's flags for t but those of its key (u, b) and of
// the fields it brings (h, k).
func flagsOf(t queue.NewTask) string {
	flags := ""
	if t.Pinned {
		flags = "p"
	}
	if t.Returning {
		flags += "r"
	}
	if t.Reserved {
		flags += "v"
	}
	if t.AdmitMax > 0 && t.Pool != "" && t.HandOff == "" {
		flags += "a"
	}
	if t.Budget != "" && !t.Returning && t.HeldFrom == "" {
		flags += "g" // a hand-off received carries its sender's reservation
	}
	return flags
}

// runShard submits tasks idx (at most MaxBatch, none for the cold tier)
// on shard in one script call. On an error, idx are unsent when
// NotSent(err).
func (s *Submitter) runShard(ctx context.Context, sc redis.Scripter, shard int, tasks []queue.NewTask, ids []string, idx []int, res []queue.SubmitResult) (unsent []int, err error) {
	keys := s.KeysWith(shard, queue.OutboxKey(s.Prefix(shard)))
	argv := make([]any, 0, 3+len(idx)*31)
	argv = append(argv, s.Clock(), len(idx), s.admitCaps(tasks, idx))
	nkeyed := 0
	var f []any
	var prevSpec *task.Spec
	var prevPool string
	var prevPinned bool
	for _, i := range idx {
		t := tasks[i]
		sp := t.Spec
		due := ""
		if sp.RunAt != nil {
			due = strconv.FormatInt(sp.RunAt.UnixMilli(), 10)
		}
		idem, ttl, hash := 0, "0", ""
		gk, gflag := s.groupKey(shard, t)
		switch {
		case sp.IdempotencyKey != "":
			nkeyed++
			idem = nkeyed
			keys = append(keys, queue.IdemKey(s.Prefix(shard), sp.Tenant, sp.IdempotencyKey))
			ttl = record.Ms(time.Duration(sp.IdempotencyTTL))
			hash = sp.Hash()
		case gk != "":
			nkeyed++
			idem = nkeyed
			keys = append(keys, gk)
			ttl, hash = s.groupArgs(sp, t.Supersedes)
		}
		// Tasks of one call often share a spec (fan-out, schedules, batches
		// built from one template): encode it once. argv copies f.
		if f == nil || sp != prevSpec || t.Pool != prevPool || t.Pinned != prevPinned {
			f = record.SpecFields(sp, s.Options().Defaults)
			if t.Pinned && t.Pool != "" {
				f = append(f, "pn", "1", "po", t.Pool)
			}
			prevSpec, prevPool, prevPinned = sp, t.Pool, t.Pinned
		}
		flags := flagsOf(t) + gflag
		fields := f
		if t.History != nil {
			flags += "h"
			fields = append(append([]any(nil), f...), historyFields(t.History, s.Options().Region)...)
		}
		if t.HeldFrom != "" {
			flags += "k"
			fields = append(fields[:len(fields):len(fields)], "hf", t.HeldFrom)
		}
		if t.Budget != "" {
			fields = append(fields[:len(fields):len(fields)], "br", t.Budget)
		}
		argv = append(argv, ids[i], t.Pool, flags, strconv.Itoa(*sp.Priority), due, idem, ttl, hash, t.HandOff, len(fields)/2)
		argv = append(argv, fields...)
	}
	argv = append(argv, s.backlogCaps(tasks, idx))
	out, err := s.Run(ctx, sc, queue.Scripts.Submit, keys, argv...).Slice()
	if err != nil {
		if cc := s.Cluster(); cc != nil && sc != redis.Scripter(s.Client()) {
			// On a connection of its own the cluster client does not see
			// a dead master or a moved slot: have it ask the cluster again.
			cc.ReloadState(ctx)
		}
		return idx, fmt.Errorf("queue: submit: %w", err)
	}
	codes := queue.ToStr(out[0])
	if len(codes) != len(idx) {
		return nil, fmt.Errorf("queue: submit: %d results for %d tasks", len(codes), len(idx))
	}
	next := 1 // the next id, state pair of a task not created
	for k, i := range idx {
		var r queue.SubmitResult
		switch c := codes[k]; {
		case record.IsItemRefusal(c):
			if next+1 >= len(out) {
				return nil, fmt.Errorf("queue: submit: short answer")
			}
			r = queue.SubmitResult{ID: queue.ToStr(out[next]), State: record.StateOf(queue.ToStr(out[next+1]))}
			next += 2
			switch c {
			case record.ItemDuplicate:
				r.Duplicate = true
			case record.ItemKeyReused:
				r.Err = task.ErrIdempotencyConflict
			case record.ItemExists:
				r.Err = task.ErrExists
			case record.ItemPoolFull:
				r = queue.SubmitResult{ID: ids[i], Err: queue.ErrPoolFull}
			case record.ItemBacklogFull:
				r = queue.SubmitResult{ID: ids[i], Err: queue.ErrBacklogFull}
			case record.ItemBacklogBytes:
				r = queue.SubmitResult{ID: ids[i], Err: queue.ErrBacklogBytesFull}
			case record.ItemBudget:
				r = queue.SubmitResult{ID: ids[i], Err: ErrBudget}
			}
		default:
			r = queue.SubmitResult{ID: ids[i], State: record.StateOf(string(c))}
		}
		res[i] = r
	}
	return nil, nil
}

// backlogCaps is submit.lua's last ARGV: "<cap> <bytes> <tenant>\n" for
// each tenant of idx with a BacklogMax or BacklogBytesMax (the first such
// task's), each its share in one shard (⌈max ÷ shards⌉; 0: none).
func (s *Submitter) backlogCaps(tasks []queue.NewTask, idx []int) string {
	var b strings.Builder
	var seen map[string]bool
	shards := int64(s.Shards())
	for _, i := range idx {
		t := tasks[i]
		tn := queue.BacklogTenant(t.Spec.Tenant)
		if (t.BacklogMax <= 0 && t.BacklogBytesMax <= 0) || seen[tn] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[tn] = true
		b.WriteString(strconv.FormatInt((int64(max(t.BacklogMax, 0))+shards-1)/shards, 10))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt((max(t.BacklogBytesMax, 0)+shards-1)/shards, 10))
		b.WriteByte(' ')
		b.WriteString(tn)
		b.WriteByte('\n')
	}
	return b.String()
}

// Backlog is tenant's unfinished tasks in this region (docs/security.md
// "max_backlog"): the sum of every shard's count, one HGET per shard.
func (s *Submitter) Backlog(ctx context.Context, tenant string) (int, error) {
	n, err := s.backlogSum(ctx, queue.BacklogKey, tenant)
	return int(n), err
}

// BacklogBytes is the payload bytes of tenant's unfinished tasks in this
// region (docs/security.md "max_backlog_bytes"), one HGET per shard.
func (s *Submitter) BacklogBytes(ctx context.Context, tenant string) (int64, error) {
	return s.backlogSum(ctx, queue.BacklogBytesKey, tenant)
}

// backlogSum sums tenant's field of the per-shard hash key names.
func (s *Submitter) backlogSum(ctx context.Context, key func(p string) string, tenant string) (int64, error) {
	var n int64
	for shard := range s.Shards() {
		v, err := s.Client().HGet(ctx, key(s.Prefix(shard)), queue.BacklogTenant(tenant)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("queue: backlog: %w", err)
		}
		n += max(v, 0)
	}
	return n, nil
}

// admitCaps is submit.lua's ARGV[3]: "pool cap pool cap …", each pool's
// READY limit in one shard for the tasks of idx admitted by AdmitMax (the
// first such task's limit ÷ shards, rounded up).
func (s *Submitter) admitCaps(tasks []queue.NewTask, idx []int) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, i := range idx {
		t := tasks[i]
		if t.AdmitMax <= 0 || t.Pool == "" || t.HandOff != "" || seen[t.Pool] {
			continue
		}
		seen[t.Pool] = true
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Pool)
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa((t.AdmitMax + s.Shards() - 1) / s.Shards()))
	}
	return b.String()
}

// historyFields are the record fields and trail lines (field "~") that
// carry h into the receiving region's record.
func historyFields(h *queue.History, region string) []any {
	f := []any{"ct", strconv.FormatInt(h.CreatedAt.UnixMilli(), 10)}
	if h.Attempts > 0 {
		f = append(f, "at", strconv.Itoa(h.Attempts))
	}
	if h.PreemptCount > 0 {
		f = append(f, "pc", strconv.Itoa(h.PreemptCount))
	}
	if h.LastError != "" {
		f = append(f, "er", record.Clean(h.LastError, task.MaxErrorLen))
	}
	for _, t := range queue.CapTrail(h.Trail) {
		r := t.Region
		if r == "" {
			r = region
		}
		f = append(f, "~", trailLine(t, r))
	}
	return f
}

// trailLine writes a step in the trail list's format (lib.lua trail), with
// the region of a carried step as an eighth column.
func trailLine(t task.Transition, region string) string {
	return strconv.FormatInt(t.At.UnixMilli(), 10) + "\t" + record.StateCodeOf(t.From) + "\t" + record.StateCodeOf(t.To) + "\t" +
		record.Clean(t.Reason, 64) + "\t" + record.Clean(t.By, 128) + "\t" + strconv.Itoa(t.Attempt) + "\t" +
		record.Clean(t.Error, task.MaxErrorLen) + "\t" + record.Clean(region, 63)
}

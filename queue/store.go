package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// MaxBatch bounds every batched script: Lua's unpack breaks near 8 000
// values and one long script blocks the whole Redis.
const MaxBatch = 1000

// Options configure a Store. Zero values take the defaults noted.
type Options struct {
	Region    string        // home region written into new ids (required)
	Shards    int           // shards of this region's Redis (default 1)
	Prefix    string        // key prefix (default "ax")
	Lease     time.Duration // lease per claim and heartbeat (default 10s)
	AgingStep time.Duration // one priority level per step of waiting (default 60s)
	// Retention of terminal records (defaults 24h, 24h, 7d).
	RetainSuccess, RetainCanceled, RetainDead time.Duration
	Defaults                                  task.Defaults
	// WaitReplicas > 0 makes every accepted submit wait for that many
	// replicas (Redis WAIT) before it is acknowledged, so it survives a
	// failover. WaitTimeout bounds the wait (default 100ms).
	WaitReplicas int
	WaitTimeout  time.Duration
	// Now, when set, replaces Redis TIME inside scripts. Tests only.
	Now func() time.Time
	// IDs generates the ids of new tasks (default: a randomly seeded
	// generator of the store's own). Tests inject one to provoke collisions.
	IDs *task.IDGen
	// RunTimePairs caps the (pool, type) pairs whose run times a shard
	// keeps (default 1024); RunTimeAlpha is the weight of a new run time in
	// a pair's moving average (default 0.2). See runtime.go.
	RunTimePairs int
	RunTimeAlpha float64
	// ColdHorizon > 0 keeps delayed tasks due later than now + ColdHorizon
	// in the cold tier (cold.go) until the leader's PromoteCold moves them
	// half a horizon ahead of their time. 0: every delayed task is hot.
	ColdHorizon time.Duration
	// Blocking, when set, is a client of the same Redis that Events uses
	// for its blocking reads (long-polls hold a connection for their whole
	// wait), so that they cannot take the connections submits and the
	// leader's loops need. nil: the main client. The store does not close it.
	Blocking redis.UniversalClient
	// EvalSHA runs every script with EVALSHA even where Redis has
	// Functions (functions.go): benchmarks' A/B.
	EvalSHA bool
}

// The defaults of Options' zero (or negative) values.
const (
	ShardsDefault         = 1
	PrefixDefault         = "ax"
	LeaseDefault          = 10 * time.Second
	AgingStepDefault      = 60 * time.Second
	RetainSuccessDefault  = 24 * time.Hour
	RetainCanceledDefault = 24 * time.Hour
	RetainDeadDefault     = 7 * 24 * time.Hour
	WaitTimeoutDefault    = 100 * time.Millisecond
	RunTimePairsDefault   = 1024
	// RunTimeAlphaDefault follows a change of a type's run time within ~10
	// completions without chasing one outlier (the placement Estimator's
	// default).
	RunTimeAlphaDefault = 0.2
)

func (o *Options) withDefaults() error {
	if !task.ValidRegionName(o.Region) {
		return fmt.Errorf("queue: region %q is not a region name", o.Region)
	}
	if o.IDs == nil {
		o.IDs = task.NewIDGen()
	}
	o.Shards = cmp.Or(max(o.Shards, 0), ShardsDefault)
	o.Prefix = cmp.Or(o.Prefix, PrefixDefault)
	o.Lease = cmp.Or(max(o.Lease, 0), LeaseDefault)
	o.AgingStep = cmp.Or(max(o.AgingStep, 0), AgingStepDefault)
	o.RetainSuccess = cmp.Or(max(o.RetainSuccess, 0), RetainSuccessDefault)
	o.RetainCanceled = cmp.Or(max(o.RetainCanceled, 0), RetainCanceledDefault)
	o.RetainDead = cmp.Or(max(o.RetainDead, 0), RetainDeadDefault)
	if o.Defaults == (task.Defaults{}) {
		o.Defaults = task.DefaultDefaults()
	}
	o.WaitTimeout = cmp.Or(max(o.WaitTimeout, 0), WaitTimeoutDefault)
	o.RunTimePairs = cmp.Or(max(o.RunTimePairs, 0), RunTimePairsDefault)
	if !(o.RunTimeAlpha > 0 && o.RunTimeAlpha <= 1) {
		o.RunTimeAlpha = RunTimeAlphaDefault
	}
	return nil
}

// engine is what every stage shares: the client and its shards, the
// options, the keys and the script runner. It is safe for concurrent use.
type engine struct {
	rdb  redis.UniversalClient
	opts Options
	keys []shardKeys
	rr   atomic.Uint32
	fns  functions // FCALL or EVALSHA (functions.go)
	// owed: with several shards, per pool the shard where a completion of
	// this store left a tenant with work waiting below its floor, and by
	// how many slots: the pool's next claims of that many start there
	// (ClaimTasks).
	owedMu sync.Mutex
	owed   map[string]owedFloor
}

type owedFloor struct{ shard, slots int }

type shardKeys struct {
	prefix string
	base   []string // KEYS[1..8] of every script
	rt     string   // run times (runtime.go)
	px     string   // live prices (prices.go)
}

// New returns a Store over rdb.
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	s := &engine{rdb: rdb, opts: opts}
	if opts.EvalSHA {
		s.fns.mode.Store(fnEval)
	}
	for i := 0; i < opts.Shards; i++ {
		p := fmt.Sprintf("%s:{%s:%d}:", opts.Prefix, opts.Region, i)
		s.keys = append(s.keys, shardKeys{prefix: p, base: []string{
			p, p + "delayed", p + "due", p + "running", p + "dead", p + "cnt", p + "events", p + "seq",
		}, rt: p + "rt", px: p + "px"})
	}
	return newStore(s), nil
}

// Options returns the store's effective options.
func (s *engine) Options() Options { return s.opts }

// Client is the underlying Redis client.
func (s *engine) Client() redis.UniversalClient { return s.rdb }

// Fence identifies a leader-only write: the election and the leader's
// fencing token (the CreateRevision of its election key).
type Fence struct {
	Name  string
	Token int64
}

func (s *engine) clock() string {
	if s.opts.Now == nil {
		return ""
	}
	return strconv.FormatInt(s.opts.Now().UnixMilli(), 10)
}

func (s *engine) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

func (s *engine) keysWith(shard int, extra ...string) []string {
	k := make([]string, 0, 8+len(extra))
	k = append(k, s.keys[shard].base...)
	return append(k, extra...)
}

func (s *engine) fenceKey(shard int, f Fence) string {
	return s.keys[shard].prefix + "fence:" + f.Name
}

func (s *engine) shardOf(id string) (int, error) {
	p, err := task.ParseID(id)
	if err != nil {
		return 0, err
	}
	// A task handed off from another region keeps its id; it lives in the
	// shard its id names, modulo this region's shard count.
	return p.Shard % s.opts.Shards, nil
}

// ShardForKey is the shard of a keyed submit: from tenant and key, so the
// key is found without a lookup.
func (s *engine) ShardForKey(tenant, key string) int {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(s.opts.Shards))
}

// NewTask is one task to accept.
type NewTask struct {
	Spec   *task.Spec // normalized (Spec.Normalize)
	Pool   string     // pool it is placed in; "" leaves it unplaced (PENDING until placed)
	Pinned bool       // stays in Pool across retries and delays instead of being re-placed
	ID     string     // fixed id (hand-off, schedules); "" generates one
	// HandOff names another region: the task waits in this region's outbox
	// (PENDING) until that region accepts it into Pool.
	HandOff string
	// Returning marks a hand-off being accepted: a HANDED_OFF record of the
	// same id here (the task left this region earlier and comes back) is
	// replaced by the live task instead of answering ErrExists.
	Returning bool
	// History is what a handed-off task brings from the region that sent
	// it (nil for a new task): the receiver goes on counting its attempts
	// and keeps its creation time and trail.
	History *History
	// HeldFrom, for a hand-off received from that region, stores the task
	// PENDING and unclaimable until that region's word: Release (it
	// recorded the hand-off) or Drop (it placed the task elsewhere). See
	// docs/architecture.md, hand-off.
	HeldFrom string
	// AdmitMax, when > 0, admits a task placed READY in Pool only while
	// the pool holds fewer READY tasks than that in this region (each
	// shard checks its share, ⌈AdmitMax ÷ shards⌉, atomically in the
	// submit script); else its result is ErrPoolFull and nothing is
	// stored. Delayed and handed-off tasks are not checked.
	AdmitMax int
	// BacklogMax, when > 0, creates the task only while its tenant has
	// fewer unfinished tasks than that in this region (docs/security.md
	// "max_backlog"): each shard checks its share, ⌈BacklogMax ÷ shards⌉,
	// atomically in the submit script; else its result is ErrBacklogFull
	// and nothing is stored (the cold tier's submit checks it the same way).
	BacklogMax int
	// Reserved: room may have been reserved for this id in its tenant's
	// backlog (ReserveBacklog, a DAG run's node): if so the task takes it
	// (it is counted already and not checked), else it is counted as any.
	Reserved bool
}

// History is the part of a task's past that travels with it from region to
// region, so a hand-off neither restarts its retry budget nor loses its trail.
type History struct {
	CreatedAt    time.Time
	Attempts     int
	PreemptCount int
	LastError    string
	// Trail is the sender's whole trail (Store.Trail), each step naming its
	// region; at most MaxCarriedTrail steps are kept (the first and the
	// latest ones).
	Trail []task.Transition
}

// MaxCarriedTrail bounds the steps a hand-off carries: a task that retried
// hundreds of times keeps its birth and its latest steps.
const MaxCarriedTrail = 256

// CapTrail keeps at most MaxCarriedTrail steps of tr: the first 16 (the
// birth and the first hand-offs) and the latest ones.
func CapTrail(tr []task.Transition) []task.Transition {
	if len(tr) <= MaxCarriedTrail {
		return tr
	}
	return append(append([]task.Transition(nil), tr[:16]...), tr[len(tr)-(MaxCarriedTrail-16):]...)
}

// historyFields are the record fields and trail lines (field "~") that
// carry h into the receiving region's record.
func historyFields(h *History, region string) []any {
	f := []any{"ct", strconv.FormatInt(h.CreatedAt.UnixMilli(), 10)}
	if h.Attempts > 0 {
		f = append(f, "at", strconv.Itoa(h.Attempts))
	}
	if h.PreemptCount > 0 {
		f = append(f, "pc", strconv.Itoa(h.PreemptCount))
	}
	if h.LastError != "" {
		f = append(f, "er", clean(h.LastError, task.MaxErrorLen))
	}
	for _, t := range CapTrail(h.Trail) {
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
	return strconv.FormatInt(t.At.UnixMilli(), 10) + "\t" + stateCodeOf(t.From) + "\t" + stateCodeOf(t.To) + "\t" +
		clean(t.Reason, 64) + "\t" + clean(t.By, 128) + "\t" + strconv.Itoa(t.Attempt) + "\t" +
		clean(t.Error, task.MaxErrorLen) + "\t" + clean(region, 63)
}

// SubmitResult is the outcome of one NewTask.
type SubmitResult struct {
	ID        string
	State     task.State
	Duplicate bool  // an earlier task with the same idempotency key and spec
	Err       error // ErrIdempotencyConflict, ErrExists, or nil
}

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
func (s *Submitter) Submit(ctx context.Context, tasks ...NewTask) ([]SubmitResult, error) {
	res := make([]SubmitResult, len(tasks))
	byShard := make([][]int, s.opts.Shards)
	now := s.now()
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		var shard int
		switch {
		case t.ID != "":
			p, err := task.ParseID(t.ID)
			if err != nil {
				return nil, err
			}
			shard = p.Shard % s.opts.Shards
		case t.Spec.IdempotencyKey != "":
			shard = s.ShardForKey(t.Spec.Tenant, t.Spec.IdempotencyKey)
		default:
			shard = int(s.rr.Add(1) % uint32(s.opts.Shards))
		}
		ids[i] = t.ID
		if ids[i] == "" {
			ids[i] = s.opts.IDs.New(s.opts.Region, shard, now)
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
			if !NotSent(err) {
				return nil, err
			}
			if refused == nil {
				refused = make([]bool, s.opts.Shards)
			}
			refused[shard] = true
			to := -1
			for k := 1; k < s.opts.Shards && to < 0; k++ {
				if n := (shard + k) % s.opts.Shards; !refused[n] {
					to = n
				}
			}
			for _, i := range unsent {
				if to < 0 || tasks[i].ID != "" || tasks[i].Spec.IdempotencyKey != "" {
					return nil, err
				}
			}
			for _, i := range unsent {
				ids[i] = s.opts.IDs.New(s.opts.Region, to, s.now())
				byShard[to] = append(byShard[to], i)
			}
			more = true
		}
	}
	return res, nil
}

// submitOn submits tasks idx on shard. On an error that NotSent reports,
// unsent are those of idx it did not store (the others' results are set).
func (s *Submitter) submitOn(ctx context.Context, shard int, tasks []NewTask, ids []string, idx []int, res []SubmitResult) (unsent []int, err error) {
	var sc redis.Scripter = s.rdb
	if s.opts.WaitReplicas > 0 {
		// WAIT counts the replicas that have this connection's writes:
		// the scripts and the WAIT must share one connection (of a
		// pool, WAIT would answer for another connection's, maybe none).
		c, err := s.conn(ctx, shard)
		if err != nil {
			return idx, fmt.Errorf("queue: submit: %w", err)
		}
		defer c.Close()
		sc = c
	}
	stored := false // on sc: with WaitReplicas, a WAIT is owed
	fail := func(rest, later []int, err error) ([]int, error) {
		if !NotSent(err) {
			return nil, err
		}
		if stored && s.opts.WaitReplicas > 0 {
			// The tasks stored on this connection are owed a WAIT that
			// this Redis refuses too: they may be lost in a failover.
			return nil, fmt.Errorf("%w: submit: shard %d stored tasks, then refused the call: %v", ErrUnavailable, shard, err)
		}
		return append(append([]int(nil), rest...), later...), err
	}
	for start := 0; start < len(idx); start += MaxBatch {
		end := min(start+MaxBatch, len(idx))
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
					ids[i] = s.opts.IDs.New(s.opts.Region, shard, s.now())
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
		n, err := c.Wait(ctx, s.opts.WaitReplicas, s.opts.WaitTimeout).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: submit: wait for replicas: %w", err)
		}
		if int(n) < s.opts.WaitReplicas {
			return nil, fmt.Errorf("%w: submit: only %d of %d replicas acknowledged", ErrUnavailable, n, s.opts.WaitReplicas)
		}
	}
	return nil, nil
}

// submitShard submits tasks idx (at most MaxBatch) on shard in one call
// (two when some go to the cold tier: those first). On an error, unsent are
// those of idx not stored when NotSent(err), the results of the others set.
func (s *Submitter) submitShard(ctx context.Context, sc redis.Scripter, shard int, tasks []NewTask, ids []string, idx []int, res []SubmitResult) (unsent []int, err error) {
	if cold, hot := s.splitCold(tasks, idx); len(cold) > 0 {
		if err := s.submitCold(ctx, sc, shard, tasks, ids, cold, res); err != nil || len(hot) == 0 {
			return idx, err
		}
		idx = hot
	}
	keys := s.keysWith(shard, s.keys[shard].prefix+"outbox")
	argv := make([]any, 0, 3+len(idx)*31)
	argv = append(argv, s.clock(), len(idx), s.admitCaps(tasks, idx))
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
		if sp.IdempotencyKey != "" {
			nkeyed++
			idem = nkeyed
			keys = append(keys, s.keys[shard].prefix+"idem:"+sp.Tenant+":"+sp.IdempotencyKey)
			ttl = ms(time.Duration(sp.IdempotencyTTL))
			hash = sp.Hash()
		}
		// Tasks of one call often share a spec (fan-out, schedules, batches
		// built from one template): encode it once. argv copies f.
		if f == nil || sp != prevSpec || t.Pool != prevPool || t.Pinned != prevPinned {
			f = specFields(sp, s.opts.Defaults)
			if t.Pinned && t.Pool != "" {
				f = append(f, "pn", "1", "po", t.Pool)
			}
			prevSpec, prevPool, prevPinned = sp, t.Pool, t.Pinned
		}
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
		fields := f
		if t.History != nil {
			flags += "h"
			fields = append(append([]any(nil), f...), historyFields(t.History, s.opts.Region)...)
		}
		if t.HeldFrom != "" {
			flags += "k"
			fields = append(fields[:len(fields):len(fields)], "hf", t.HeldFrom)
		}
		argv = append(argv, ids[i], t.Pool, flags, strconv.Itoa(*sp.Priority), due, idem, ttl, hash, t.HandOff, len(fields)/2)
		argv = append(argv, fields...)
	}
	argv = append(argv, s.backlogCaps(tasks, idx))
	out, err := s.run(ctx, sc, scripts.submit, keys, argv...).Slice()
	if err != nil {
		if cc := s.cluster(); cc != nil && sc != redis.Scripter(s.rdb) {
			// On a connection of its own the cluster client does not see
			// a dead master or a moved slot: have it ask the cluster again.
			cc.ReloadState(ctx)
		}
		return idx, fmt.Errorf("queue: submit: %w", err)
	}
	codes := toStr(out[0])
	if len(codes) != len(idx) {
		return nil, fmt.Errorf("queue: submit: %d results for %d tasks", len(codes), len(idx))
	}
	next := 1 // the next id, state pair of a task not created
	for k, i := range idx {
		var r SubmitResult
		switch c := codes[k]; c {
		case '1', '2', '3', '4', '5':
			if next+1 >= len(out) {
				return nil, fmt.Errorf("queue: submit: short answer")
			}
			r = SubmitResult{ID: toStr(out[next]), State: stateOf(toStr(out[next+1]))}
			next += 2
			switch c {
			case '1':
				r.Duplicate = true
			case '2':
				r.Err = task.ErrIdempotencyConflict
			case '3':
				r.Err = task.ErrExists
			case '4':
				r = SubmitResult{ID: ids[i], Err: ErrPoolFull}
			case '5':
				r = SubmitResult{ID: ids[i], Err: ErrBacklogFull}
			}
		default:
			r = SubmitResult{ID: ids[i], State: stateOf(string(c))}
		}
		res[i] = r
	}
	return nil, nil
}

// backlogCaps is submit.lua's last ARGV: "<cap> <tenant>\n" for each
// tenant of idx with a BacklogMax (the first such task's), cap its share
// in one shard, ⌈BacklogMax ÷ shards⌉.
func (s *Submitter) backlogCaps(tasks []NewTask, idx []int) string {
	var b strings.Builder
	var seen map[string]bool
	for _, i := range idx {
		t := tasks[i]
		tn := backlogTenant(t.Spec.Tenant)
		if t.BacklogMax <= 0 || seen[tn] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[tn] = true
		b.WriteString(strconv.Itoa((t.BacklogMax + s.opts.Shards - 1) / s.opts.Shards))
		b.WriteByte(' ')
		b.WriteString(tn)
		b.WriteByte('\n')
	}
	return b.String()
}

// backlogTenant is a tenant's field in the backlog hash: the record's tn,
// absent (”) for the default tenant.
func backlogTenant(tenant string) string {
	if tenant == "default" {
		return ""
	}
	return tenant
}

// Backlog is tenant's unfinished tasks in this region (docs/security.md
// "max_backlog"): the sum of every shard's count, one HGET per shard.
func (s *Submitter) Backlog(ctx context.Context, tenant string) (int, error) {
	n := 0
	for shard := range s.keys {
		v, err := s.rdb.HGet(ctx, s.keys[shard].prefix+"bl", backlogTenant(tenant)).Int()
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
func (s *Submitter) admitCaps(tasks []NewTask, idx []int) string {
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
		b.WriteString(strconv.Itoa((t.AdmitMax + s.opts.Shards - 1) / s.opts.Shards))
	}
	return b.String()
}

// PromoteResult reports one promotion pass.
type PromoteResult struct {
	Moved    int       // tasks that left the delayed set
	Ready    int       // of those, made READY in their pinned pool
	Deferred int       // of those, put back: backpressure or the re-admission limit
	Readmit  int       // preempted tasks made READY again
	NextDue  time.Time // earliest remaining due time; zero when none
}

// PromoteOptions are the leader's adaptive limits for one promotion pass.
type PromoteOptions struct {
	// Readmit is how many preempted tasks may become READY in this pass
	// (the re-admission rate limit); negative means no limit.
	Readmit int
	// HotPools are pools whose priorities 3–4 (not critical) are deferred
	// by backpressure, each by a jittered 50–100 % of Spread.
	HotPools []string
	Spread   time.Duration
}

// Promote moves due delayed tasks on, at most limit per shard and call
// (≤ MaxBatch), in scripts of at most promoteChunk tasks. Pinned tasks
// become READY; the others wait in the due set for placement (DueTasks,
// Place).
func (s *Maintainer) Promote(ctx context.Context, f Fence, limit int, opt ...PromoteOptions) (PromoteResult, error) {
	limit = clampBatch(limit)
	o := PromoteOptions{Readmit: -1}
	if len(opt) > 0 {
		o = opt[0]
	}
	hot := ""
	if len(o.HotPools) > 0 {
		hot = "," + strings.Join(o.HotPools, ",") + ","
	}
	var res PromoteResult
	for shard := range s.keys {
		var next *time.Time
		readmitted := 0
		for done := 0; done < limit; {
			n := min(promoteChunk, limit-done)
			budget := o.Readmit
			if budget >= 0 {
				budget = max(0, budget-readmitted)
			}
			out, err := s.run(ctx, s.rdb, scripts.promote, s.keysWith(shard, s.fenceKey(shard, f)),
				s.clock(), f.Token, n, budget, hot, o.Spread.Milliseconds()).Slice()
			if err != nil {
				return res, fmt.Errorf("queue: promote: %w", err)
			}
			if fenced(out) {
				return res, ErrFenced
			}
			moved := toInt(out[0])
			res.Moved += moved
			res.Ready += toInt(out[1])
			if len(out) > 4 {
				res.Deferred += toInt(out[3])
				readmitted += toInt(out[4])
			}
			next = msTime(toStr(out[2]))
			done += moved
			if len(out) > 5 && toInt(out[5]) == 0 || len(out) <= 5 && moved < n {
				break // nothing more is due now
			}
			if moved == 0 {
				done++ // the limit was reached by markers alone: still bounded
			}
		}
		res.Readmit += readmitted
		if next != nil && (res.NextDue.IsZero() || next.Before(res.NextDue)) {
			res.NextDue = *next
		}
	}
	return res, nil
}

// promoteChunk bounds one promote script. On a Redis holding a million
// tasks a promotion costs about 10 µs a task, so 1 000 in one script would
// block every other client for 10 ms; 500 keep each script near 5 ms. A
// Promote call of up to MaxBatch runs as two scripts then.
const promoteChunk = 500

// DueTasks returns up to limit PENDING tasks that are due and wait for
// placement, oldest first. Read-only. Only what placement reads is filled
// in (id, state, type, tags, regions, priority, critical, tenant, trace):
// leaving the payload and the rest in Redis halves the cost of the read.
func (s *Maintainer) DueTasks(ctx context.Context, limit int) ([]*task.Task, error) {
	limit = clampBatch(limit)
	var out []*task.Task
	for shard := range s.keys {
		ids, err := s.rdb.ZRange(ctx, s.keys[shard].base[2], 0, int64(limit-1)).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: due tasks: %w", err)
		}
		if len(ids) == 0 {
			continue
		}
		p := s.keys[shard].prefix
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, p+"t:"+id, placementFields...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("queue: due tasks: %w", err)
		}
		for i, c := range cmds {
			vals := c.Val()
			if len(vals) == 0 || vals[0] == nil {
				continue // gone meanwhile
			}
			var r taskReader
			r.t = &task.Task{ID: ids[i]}
			for j, v := range vals {
				if v, ok := v.(string); ok {
					r.set(placementFields[j], v)
				}
			}
			t := r.finish(s.opts.Defaults)
			t.HeldBy = s.opts.Region
			out = append(out, t)
		}
	}
	return out, nil
}

// placementFields are the record fields DueTasks reads; st first. Every
// field placement reads is here: the price cap (mp: a task's own, or its
// tenant's budget cap) and the wait target (mw) apply to delayed tasks, DAG
// nodes, schedule slots and re-placed tasks as they do at submit.
var placementFields = []string{"st", "ty", "tg", "rg", "pr", "cr", "tn", "tr", "rs", "du", "mp", "mw"}

// Assignment is a placement decision for a due task: a local pool, or no
// capacity now (Pool "") with the time to try again.
type Assignment struct {
	ID      string
	Pool    string
	RetryAt time.Time
	// Region, when set, is another region: the task goes to the outbox to be
	// handed to Pool there.
	Region string
	// Reason of a deferral (Pool ""): NO_CAPACITY (default) or
	// DEFERRED_BACKPRESSURE.
	Reason string
}

// PlaceResult counts what Place did.
type PlaceResult struct{ Placed, Deferred, Skipped int }

// Place applies placement decisions to due tasks (leader only), in scripts
// of at most promoteChunk tasks (a placement costs about what a classic
// promotion does, so the same bound keeps each script near 5 ms).
func (s *Maintainer) Place(ctx context.Context, f Fence, as []Assignment) (PlaceResult, error) {
	var res PlaceResult
	byShard := make([][]any, s.opts.Shards)
	for _, a := range as {
		shard, err := s.shardOf(a.ID)
		if err != nil {
			res.Skipped++
			continue
		}
		retry := ""
		if a.Pool == "" {
			retry = strconv.FormatInt(a.RetryAt.UnixMilli(), 10)
		}
		byShard[shard] = append(byShard[shard], a.ID, a.Pool, retry, a.Region, a.Reason)
	}
	for shard, items := range byShard {
		for start := 0; start < len(items); start += 5 * promoteChunk {
			chunk := items[start:min(start+5*promoteChunk, len(items))]
			argv := append([]any{s.clock(), f.Token, len(chunk) / 5}, chunk...)
			out, err := s.run(ctx, s.rdb, scripts.place, s.keysWith(shard, s.fenceKey(shard, f), s.keys[shard].prefix+"outbox"), argv...).Slice()
			if err != nil {
				return res, fmt.Errorf("queue: place: %w", err)
			}
			if fenced(out) {
				return res, ErrFenced
			}
			res.Placed += toInt(out[0])
			res.Deferred += toInt(out[1])
			res.Skipped += toInt(out[2])
		}
	}
	return res, nil
}

// ClaimRequest asks for up to N READY tasks of a pool.
type ClaimRequest struct {
	Pool   string
	Worker string
	N      int
	// Price is the worker's price per slot-hour, recorded on each task
	// at claim when the region leader has published no live price for the
	// pool (SetPrices); 0: none.
	Price float64
	// Types the claimer serves: only tasks of these types are taken (the
	// zero value: every type). Tasks of other types keep their place.
	Types Types
}

// Claim takes up to N READY tasks of a pool (READY→RUNNING), each with a
// lease token in Task.LeaseToken.
func (s *Claimer) Claim(ctx context.Context, req ClaimRequest) ([]*task.Task, error) {
	c, err := s.ClaimTasks(ctx, req)
	return c.Tasks, err
}

// Claimed is a claim's answer.
type Claimed struct {
	Tasks []*task.Task
	// Parked is how soon tasks parked by a limit are looked at again, on
	// the shards this claim visited (0: none parked): a claimer that found
	// nothing claims again then instead of waiting for a wake-up.
	Parked time.Duration
	// Counts: the pool has a fair share, which counts what runs: a
	// claimer should record the outcomes of its ended tasks before it
	// claims the slots they freed, or the claim counts them as running and
	// a floor's freed slot goes to another tenant (docs/fairness.md, "Ties
	// and stale counts").
	Counts bool
}

// ClaimTasks is Claim that also says when parked tasks may be released and
// whether what runs counts (Claimed.Counts).
func (s *Claimer) ClaimTasks(ctx context.Context, req ClaimRequest) (Claimed, error) {
	var c Claimed
	n := clampBatch(req.N)
	served := req.Types.code
	if req.Types.All() {
		served = "*"
	} else if served == "," {
		return c, nil // serves no type
	}
	price := ""
	if req.Price > 0 {
		price = strconv.FormatFloat(req.Price, 'f', -1, 64)
	}
	var out []*task.Task
	start := int(s.rr.Add(1))
	if s.opts.Shards > 1 {
		if k, ok := s.takeOwed(req.Pool, n); ok {
			start = k
		}
	}
	for i := 0; i < s.opts.Shards && len(out) < n; i++ {
		shard := (start + i) % s.opts.Shards
		res, err := s.run(ctx, s.rdb, scripts.claim, s.keysWith(shard, s.keys[shard].px), s.clock(), req.Pool, req.Worker,
			n-len(out), s.opts.Lease.Milliseconds(), s.opts.AgingStep.Milliseconds(), price,
			s.opts.Defaults.Timeout.Milliseconds(), served, claimSkip).Slice()
		if err != nil {
			c.Tasks = out
			return c, fmt.Errorf("queue: claim: %w", err)
		}
		if len(res) < 4 {
			continue
		}
		if len(res)%2 == 1 {
			c.Counts = true
		}
		now := msTime(toStr(res[0]))
		first, _ := strconv.ParseInt(toStr(res[1]), 10, 64)
		paid, _ := strconv.ParseFloat(toStr(res[2]), 64)
		if p := toStr(res[3]); p != "" {
			d := time.Duration(toInt(p)) * time.Millisecond
			if c.Parked == 0 || d < c.Parked {
				c.Parked = max(d, time.Millisecond)
			}
		}
		for j := 4; j+1 < len(res); j += 2 {
			pairs, _ := res[j+1].([]any)
			t := decodePairs(toStr(res[j]), pairs, s.opts.Defaults)
			if mayBeLazy(t) {
				markLazyReady(t) // the claim wrote rs, rt, eq as well
			}
			// What the claim set in Redis, applied to the copy read before it.
			t.State, t.Reason, t.Worker = task.Running, task.ReasonClaimed, req.Worker
			t.LeaseToken = strconv.FormatInt(first+int64((j-4)/2), 10)
			if now != nil {
				sa := *now
				t.StartedAt = &sa
			}
			t.Attempts++
			t.PricePerHour = paid
			t.HeldBy = s.opts.Region
			out = append(out, t)
		}
	}
	c.Tasks = out
	return c, nil
}

// WaitForWork blocks until a wake-up marker for pool appears or timeout
// passes. It returns true when woken. A claimer that waits again and again
// keeps a Waker instead (on a Redis Cluster this call sets one up and tears
// it down each time).
func (s *Claimer) WaitForWork(ctx context.Context, pool string, timeout time.Duration) (bool, error) {
	w := s.NewWaker(pool)
	defer w.Close()
	return w.Wait(ctx, timeout)
}

// Lease identifies a held task.
type Lease struct{ ID, Token string }

// StopReason says why a worker must stop a task.
type StopReason string

const (
	StopLost      StopReason = "LOST"
	StopCanceled  StopReason = "CANCELED"
	StopPreempted StopReason = "PREEMPTED"
	StopDeadline  StopReason = "DEADLINE"
)

// Stop is a held task the worker must stop.
type Stop struct {
	Lease
	Why StopReason
}

// Heartbeat extends every lease a worker holds and records the worker (with
// its slots and the task types it serves; the zero Types: not said) as
// alive in its pool, one call per shard. It returns the tasks to stop.
func (s *Claimer) Heartbeat(ctx context.Context, worker, pool string, slots int, types Types, held []Lease) ([]Stop, error) {
	byShard := make([][]any, s.opts.Shards)
	var stops []Stop
	for _, l := range held {
		shard, err := s.shardOf(l.ID)
		if err != nil {
			stops = append(stops, Stop{Lease: l, Why: StopLost})
			continue
		}
		byShard[shard] = append(byShard[shard], l.ID, l.Token)
	}
	for shard, items := range byShard {
		if shard != 0 && len(items) == 0 {
			continue // liveness lives in shard 0
		}
		p := s.keys[shard].prefix
		// The types live where the leader reads liveness: shard 0.
		typ := "-"
		if shard == 0 {
			typ = types.code
		}
		argv := append([]any{s.clock(), worker, s.opts.Lease.Milliseconds(), slots, len(items) / 2,
			s.opts.Defaults.Timeout.Milliseconds(), typ}, items...)
		out, err := s.run(ctx, s.rdb, scripts.heartbeat, s.keysWith(shard, p+"workers:"+pool, p+"slots:"+pool,
			p+"types:"+pool), argv...).Slice()
		if err != nil {
			return nil, fmt.Errorf("queue: heartbeat: %w", err)
		}
		for i := 0; i+2 < len(out); i += 3 {
			stops = append(stops, Stop{Lease: Lease{ID: toStr(out[i]), Token: toStr(out[i+1])}, Why: StopReason(toStr(out[i+2]))})
		}
	}
	return stops, nil
}

// Completion is a successful attempt to record.
type Completion struct {
	ID, Token, Result string
	// MaxResult is how many bytes of Result are kept (0:
	// task.MaxResultLen); a caller that refuses larger results instead of
	// cutting them checks them before.
	MaxResult int
}

// Complete records successes (RUNNING→SUCCESS) in batches. The returned
// slice holds nil or ErrLeaseLost per completion.
func (s *Claimer) Complete(ctx context.Context, cs ...Completion) ([]error, error) {
	errs := make([]error, len(cs))
	byShard := make([][]int, s.opts.Shards)
	for i, c := range cs {
		shard, err := s.shardOf(c.ID)
		if err != nil {
			errs[i] = err
			continue
		}
		byShard[shard] = append(byShard[shard], i)
	}
	for shard, idx := range byShard {
		for start := 0; start < len(idx); start += MaxBatch {
			part := idx[start:min(start+MaxBatch, len(idx))]
			argv := make([]any, 0, 5+3*len(part))
			argv = append(argv, s.clock(), len(part), s.opts.RunTimePairs, s.alpha(), s.opts.RetainSuccess.Milliseconds())
			for _, i := range part {
				argv = append(argv, cs[i].ID, cs[i].Token, bound(cs[i].Result, cmp.Or(cs[i].MaxResult, task.MaxResultLen)))
			}
			out, err := s.run(ctx, s.rdb, scripts.complete, s.keysWith(shard, s.keys[shard].rt), argv...).Slice()
			if err != nil {
				return nil, fmt.Errorf("queue: complete: %w", err)
			}
			for k, i := range part {
				if toInt(out[k]) != codeOK {
					errs[i] = ErrLeaseLost
				}
			}
			if len(out) > len(part)+1 && s.opts.Shards > 1 {
				s.owe(toStr(out[len(part)]), shard, toInt(out[len(part)+1]))
			}
		}
	}
	return errs, nil
}

// owe records that pool's shard owes a floor slots: a tenant with work
// waiting there is below its floor by that many after a completion. The
// store's next claims of the pool, for that many slots, start on that
// shard, so the slots the completions freed go to the floor
// (docs/fairness.md, "Shards"), not to whatever shard the claims' turn is
// at; slots freed one at a time are claimed one at a time.
func (s *Claimer) owe(pool string, shard, slots int) {
	if slots <= 0 {
		return
	}
	s.owedMu.Lock()
	if s.owed == nil {
		s.owed = map[string]owedFloor{}
	}
	s.owed[pool] = owedFloor{shard, slots}
	s.owedMu.Unlock()
}

// takeOwed returns the shard where pool owes a floor, counting a claim of
// n slots against what it owes.
func (s *Claimer) takeOwed(pool string, n int) (int, bool) {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	o, ok := s.owed[pool]
	if !ok {
		return 0, false
	}
	if o.slots -= n; o.slots > 0 {
		s.owed[pool] = o
	} else {
		delete(s.owed, pool)
	}
	return o.shard, true
}

// Failure is a failed attempt to record.
type Failure struct {
	ID, Token string
	Error     string
	Retryable bool
	Reason    string // trail reason of the step; default HANDLER_ERROR
}

// Fail records a failed attempt: retry with backoff and jitter while retries
// are left and the error is retryable, else FAILED into the dead set. It
// returns the new state and, for PENDING, when the retry is due.
func (s *Claimer) Fail(ctx context.Context, f Failure) (task.State, time.Time, error) {
	shard, err := s.shardOf(f.ID)
	if err != nil {
		return "", time.Time{}, err
	}
	reason := f.Reason
	if reason == "" {
		reason = task.ReasonHandlerError
	}
	retry := "0"
	if f.Retryable {
		retry = "1"
	}
	out, err := s.run(ctx, s.rdb, scripts.fail, s.keysWith(shard, s.keys[shard].rt), s.clock(), f.ID, f.Token,
		clean(f.Error, task.MaxErrorLen), retry, rand.IntN(1000), s.opts.RetainDead.Milliseconds(),
		s.opts.RetainCanceled.Milliseconds(), reason, s.opts.Defaults.MaxRetries,
		s.opts.Defaults.RetryBase.Milliseconds(), s.opts.Defaults.RetryCap.Milliseconds(),
		s.opts.RunTimePairs, s.alpha()).Slice()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("queue: fail: %w", err)
	}
	if err := leaseResult(f.ID, out); err != nil {
		return "", time.Time{}, err
	}
	var due time.Time
	if t := msTime(toStr(out[2])); t != nil && toStr(out[2]) != "0" {
		due = *t
	}
	return stateOf(toStr(out[1])), due, nil
}

// Return gives a RUNNING task back without spending a retry (graceful
// shutdown, preemption): READY at once with its original enqueue time, or
// after delay.
func (s *Claimer) Return(ctx context.Context, id, token, reason string, delay time.Duration) (task.State, error) {
	shard, err := s.shardOf(id)
	if err != nil {
		return "", err
	}
	out, err := s.run(ctx, s.rdb, scripts.ret, s.keysWith(shard), s.clock(), id, token, reason,
		delay.Milliseconds(), s.opts.RetainCanceled.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: return: %w", err)
	}
	if err := leaseResult(id, out); err != nil {
		return "", err
	}
	return stateOf(toStr(out[1])), nil
}

func leaseResult(id string, out []any) error {
	switch toInt(out[0]) {
	case codeOK:
		return nil
	case codeLeaseLost:
		return fmt.Errorf("%w: task %s is %s", ErrLeaseLost, id, stateOf(toStr(out[1])))
	default:
		return fmt.Errorf("%w: %s", task.ErrNotFound, id)
	}
}

// Reap moves expired leases through TIMEOUT on (leader only), at most limit
// per shard. It returns how many it moved and the next lease expiry.
func (s *Maintainer) Reap(ctx context.Context, f Fence, limit int) (int, time.Time, error) {
	limit = clampBatch(limit)
	total := 0
	var next time.Time
	for shard := range s.keys {
		out, err := s.run(ctx, s.rdb, scripts.reap, s.keysWith(shard, s.fenceKey(shard, f)), s.clock(), f.Token,
			limit, rand.IntN(1000), s.opts.RetainDead.Milliseconds(), s.opts.RetainCanceled.Milliseconds(),
			s.opts.Defaults.MaxRetries, s.opts.Defaults.RetryBase.Milliseconds(), s.opts.Defaults.RetryCap.Milliseconds(),
			s.opts.Defaults.Timeout.Milliseconds()).Slice()
		if err != nil {
			return total, next, fmt.Errorf("queue: reap: %w", err)
		}
		if fenced(out) {
			return total, next, ErrFenced
		}
		total += toInt(out[0])
		if t := msTime(toStr(out[1])); t != nil && (next.IsZero() || t.Before(next)) {
			next = *t
		}
	}
	return total, next, nil
}

// HandedOffError says a task now lives in another region.
type HandedOffError struct{ ID, Region string }

func (e *HandedOffError) Error() string {
	return fmt.Sprintf("queue: task %s was handed off to %s", e.ID, e.Region)
}

// Cancel cancels a task: PENDING/READY at once (returns CANCELED), RUNNING
// as a request (returns RUNNING). Terminal tasks give a *TransitionError,
// handed-off ones a *HandedOffError.
func (s *Tasks) Cancel(ctx context.Context, id, reason, by string) (task.State, error) {
	shard, err := s.shardOf(id)
	if err != nil {
		return "", err
	}
	if reason == "" {
		reason = task.ReasonCanceledByUser
	}
	out, err := s.run(ctx, s.rdb, scripts.cancel, s.keysWith(shard), s.clock(), id, reason, by,
		s.opts.RetainCanceled.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: cancel: %w", err)
	}
	st, err := s.opResult(id, "cancel", out)
	if s.thawedOn(ctx, id, err) {
		return s.Cancel(ctx, id, reason, by)
	}
	return st, err
}

func (s *engine) opResult(id, op string, out []any) (task.State, error) {
	switch toInt(out[0]) {
	case codeOK:
		if len(out) > 1 {
			return stateOf(toStr(out[1])), nil
		}
		return "", nil
	case codeIllegal:
		return "", &task.TransitionError{ID: id, State: stateOf(toStr(out[1])), Op: op}
	case codeHandedOff:
		return "", &HandedOffError{ID: id, Region: toStr(out[1])}
	case codeHandOffInFlight:
		return "", &task.TransitionError{ID: id, State: task.Pending, Op: op, Note: "hand-off to " + toStr(out[1]) + " in flight"}
	default:
		return "", fmt.Errorf("%w: %s", task.ErrNotFound, id)
	}
}

// Replay puts a dead letter back (FAILED→PENDING) with a fresh retry budget.
// A handed-off task gives a *HandedOffError naming where it lives.
func (s *Tasks) Replay(ctx context.Context, id, by string) error {
	shard, err := s.shardOf(id)
	if err != nil {
		return err
	}
	out, err := s.run(ctx, s.rdb, scripts.replay, s.keysWith(shard), s.clock(), id, by).Slice()
	if err != nil {
		return fmt.Errorf("queue: replay: %w", err)
	}
	_, err = s.opResult(id, "replay", out)
	if s.thawedOn(ctx, id, err) {
		return s.Replay(ctx, id, by)
	}
	return err
}

// SetPriority changes a live task's priority; a READY task keeps its place
// in time.
func (s *Tasks) SetPriority(ctx context.Context, id string, priority int, by string) error {
	if priority < 0 || priority > task.MaxPriority {
		return &task.FieldError{Field: "priority", Msg: fmt.Sprintf("must be between 0 and %d", task.MaxPriority)}
	}
	shard, err := s.shardOf(id)
	if err != nil {
		return err
	}
	out, err := s.run(ctx, s.rdb, scripts.priority, s.keysWith(shard), s.clock(), id, priority, by).Slice()
	if err != nil {
		return fmt.Errorf("queue: priority: %w", err)
	}
	_, err = s.opResult(id, "change the priority of", out)
	if s.thawedOn(ctx, id, err) {
		return s.SetPriority(ctx, id, priority, by)
	}
	return err
}

// Swept is what one Sweep did and left.
type Swept struct {
	// Dead letters dropped and successes deleted.
	Dead, Successes int
	// Left: some shard has successes past their retention still to delete;
	// sweep again now.
	Left bool
	// Lag is how long the oldest minute of successes not yet deleted has
	// been past its retention (the largest of the shards; 0: none is).
	Lag time.Duration
}

// Sweep drops dead letters older than the retention and deletes the
// successes past theirs (leader only; sweep.lua): one call of the script a
// shard, each deleting at most limit successes (MaxBatch: ~2.3 ms of
// Redis, BenchmarkSweepSuccesses). The caller repeats while Left, so the
// sweep keeps up with any completion rate, and calls it at least every
// SweepAlive/2 otherwise: complete.lua keeps successes without a TTL only
// while a Sweep ran within SweepAlive.
func (s *Maintainer) Sweep(ctx context.Context, f Fence, limit int) (Swept, error) {
	var r Swept
	for shard := range s.keys {
		out, err := s.run(ctx, s.rdb, scripts.sweep, s.keysWith(shard, s.fenceKey(shard, f)), s.clock(), f.Token,
			s.opts.RetainDead.Milliseconds(), clampBatch(limit), s.opts.RetainSuccess.Milliseconds(), clampBatch(limit),
			SweepAlive.Milliseconds()).Slice()
		if err != nil {
			return r, fmt.Errorf("queue: sweep: %w", err)
		}
		if fenced(out) {
			return r, ErrFenced
		}
		if len(out) < 4 {
			return r, fmt.Errorf("queue: sweep: %d values returned, want 4", len(out))
		}
		r.Dead += toInt(out[0])
		r.Successes += toInt(out[1])
		r.Left = r.Left || toInt(out[2]) != 0
		r.Lag = max(r.Lag, time.Duration(toInt(out[3]))*time.Millisecond)
	}
	return r, nil
}

// SweepAlive is how long one Sweep keeps complete.lua from giving successes
// a TTL each (the key rsw): a leader sweeps far more often, so only a
// region without a sweeping leader for that long (led by a build without
// the sweep, or leaderless) pays the TTL per task.
const SweepAlive = 5 * time.Minute

// PoolWorkers reports the live workers of a pool after forgetting those
// silent for longer than cutoff (leader only).
type PoolWorkers struct {
	Removed, Live, Slots int
	// Types is the union of the task types the live workers serve, sorted;
	// nil when nothing restricts the pool: no live workers, a live worker
	// did not say (built before types were published) or serves every
	// type, or the union exceeds MaxPoolTypes. Empty (not nil) when the
	// live workers serve no type.
	Types []string
}

// CleanWorkers forgets a pool's dead workers and returns the live figures.
func (s *Maintainer) CleanWorkers(ctx context.Context, f Fence, pool string, cutoff time.Duration) (PoolWorkers, error) {
	p := s.keys[0].prefix
	out, err := s.run(ctx, s.rdb, scripts.workers, s.keysWith(0, s.fenceKey(0, f), p+"workers:"+pool, p+"slots:"+pool,
		p+"types:"+pool), s.clock(), f.Token, cutoff.Milliseconds()).Slice()
	if err != nil {
		return PoolWorkers{}, fmt.Errorf("queue: clean workers: %w", err)
	}
	if fenced(out) {
		return PoolWorkers{}, ErrFenced
	}
	pw := PoolWorkers{Removed: toInt(out[0]), Live: toInt(out[1]), Slots: toInt(out[2])}
	if pw.Live == 0 || toInt(out[3]) != 0 {
		return pw, nil // no worker, or one that may serve any type
	}
	union := map[string]bool{}
	for _, v := range out[4:] {
		for _, t := range splitTypes(toStr(v)) {
			union[t] = true
		}
		if len(union) > MaxPoolTypes {
			return pw, nil
		}
	}
	pw.Types = make([]string, 0, len(union))
	for t := range union {
		pw.Types = append(pw.Types, t)
	}
	sort.Strings(pw.Types)
	return pw, nil
}

func clampBatch(n int) int {
	if n <= 0 || n > MaxBatch {
		return MaxBatch
	}
	return n
}

func toInt(v any) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

func toStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// NewID returns a new id of this region on shard, from the store's generator.
func (s *engine) NewID(shard int, now time.Time) string {
	return s.opts.IDs.New(s.opts.Region, shard, now)
}

// ReserveBacklog reserves room in tenant's backlog in this region for
// tasks that will be created later with these ids (a DAG run's nodes,
// docs/security.md "max_backlog"), as if they existed: they count from
// now, and a task created with NewTask.Reserved under one of them takes
// its room instead of being counted (or checked) again. Each shard checks
// the ids it will hold against its share of max, ⌈max ÷ shards⌉, with its
// count in one script, so concurrent reservations and submits never pass
// it together. All or nothing: when a shard has no room, the shards
// reserved already give theirs back and the error is ErrBacklogFull.
// UnreserveBacklog gives back the room of ids whose task was never
// created.
func (s *engine) ReserveBacklog(ctx context.Context, tenant string, max int, ids []string) error {
	byShard, err := s.idsByShard(ids)
	if err != nil {
		return err
	}
	capOf := strconv.Itoa((max + s.opts.Shards - 1) / s.opts.Shards)
	tn := backlogTenant(tenant)
	var done []string
	for shard, sids := range byShard {
		if len(sids) == 0 {
			continue
		}
		argv := make([]any, 0, 4+len(sids))
		argv = append(argv, s.clock(), "r", tn, capOf)
		for _, id := range sids {
			argv = append(argv, id)
		}
		ok, err := s.run(ctx, s.rdb, scripts.backlog, s.keysWith(shard), argv...).Int()
		if err == nil && ok != 1 {
			err = fmt.Errorf("%w: %d tasks of tenant %s do not fit in its max_backlog (%d)", ErrBacklogFull, len(ids), tenant, max)
		} else if err != nil {
			err = fmt.Errorf("queue: reserve backlog: %w", err)
		}
		if err != nil {
			if len(done) > 0 {
				_ = s.UnreserveBacklog(context.WithoutCancel(ctx), done)
			}
			return err
		}
		done = append(done, sids...)
	}
	return nil
}

// UnreserveBacklog gives back the backlog room ReserveBacklog reserved for
// ids whose task was not created (a node that never ran, a run that
// ended); ids created already, or never reserved, change nothing, so it
// may run any number of times.
func (s *engine) UnreserveBacklog(ctx context.Context, ids []string) error {
	byShard, err := s.idsByShard(ids)
	if err != nil {
		return err
	}
	for shard, sids := range byShard {
		if len(sids) == 0 {
			continue
		}
		argv := make([]any, 0, 4+len(sids))
		argv = append(argv, s.clock(), "u", "", "0")
		for _, id := range sids {
			argv = append(argv, id)
		}
		if err := s.run(ctx, s.rdb, scripts.backlog, s.keysWith(shard), argv...).Err(); err != nil {
			return fmt.Errorf("queue: give back backlog: %w", err)
		}
	}
	return nil
}

// idsByShard groups ids by the shard that holds them.
func (s *engine) idsByShard(ids []string) ([][]string, error) {
	out := make([][]string, s.opts.Shards)
	for _, id := range ids {
		shard, err := s.shardOf(id)
		if err != nil {
			return nil, err
		}
		out[shard] = append(out[shard], id)
	}
	return out, nil
}

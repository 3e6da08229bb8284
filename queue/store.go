package queue

import (
	"cmp"
	"context"
	"fmt"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
type Engine struct {
	RDB  redis.UniversalClient
	Opts Options
	Keys []shardKeys
	Rr   atomic.Uint32
	Fns  functions // FCALL or EVALSHA (functions.go)
	// owed: with several shards, per pool the shard where a completion of
	// this store left a tenant with work waiting below its floor, and by
	// how many slots: the pool's next claims of that many start there
	// (ClaimTasks).
	owedMu sync.Mutex
	owed   map[string]owedFloor
}

type owedFloor struct{ shard, slots int }

type shardKeys struct {
	Prefix string
	Base   []string // KEYS[1..8] of every script
	Rt     string   // run times (runtime.go)
	px     string   // live prices (prices.go)
}

// newEngine returns the engine over rdb, opts' zero values defaulted.
func NewEngine(rdb redis.UniversalClient, opts Options) (*Engine, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	s := &Engine{RDB: rdb, Opts: opts}
	if opts.EvalSHA {
		s.Fns.Mode.Store(FnEval)
	}
	for i := 0; i < opts.Shards; i++ {
		p := fmt.Sprintf("%s:{%s:%d}:", opts.Prefix, opts.Region, i)
		s.Keys = append(s.Keys, shardKeys{Prefix: p, Base: []string{
			p, p + "delayed", p + "due", p + "running", p + "dead", p + "cnt", p + "events", p + "seq",
		}, Rt: p + "rt", px: p + "px"})
	}
	return s, nil
}

// Options returns the store's effective options.
func (s *Engine) Options() Options { return s.Opts }

// Client is the underlying Redis client.
func (s *Engine) Client() redis.UniversalClient { return s.RDB }

// Fence identifies a leader-only write: the election and the leader's
// fencing token (the CreateRevision of its election key).
type Fence struct {
	Name  string
	Token int64
}

func (s *Engine) Clock() string {
	if s.Opts.Now == nil {
		return ""
	}
	return strconv.FormatInt(s.Opts.Now().UnixMilli(), 10)
}

func (s *Engine) Now() time.Time {
	if s.Opts.Now != nil {
		return s.Opts.Now()
	}
	return time.Now()
}

func (s *Engine) KeysWith(shard int, extra ...string) []string {
	k := make([]string, 0, 8+len(extra))
	k = append(k, s.Keys[shard].Base...)
	return append(k, extra...)
}

func (s *Engine) fenceKey(shard int, f Fence) string {
	return s.Keys[shard].Prefix + "fence:" + f.Name
}

func (s *Engine) ShardOf(id string) (int, error) {
	p, err := task.ParseID(id)
	if err != nil {
		return 0, err
	}
	// A task handed off from another region keeps its id; it lives in the
	// shard its id names, modulo this region's shard count.
	return p.Shard % s.Opts.Shards, nil
}

// ShardForKey is the shard of a keyed submit: from tenant and key, so the
// key is found without a lookup.
func (s *Engine) ShardForKey(tenant, key string) int {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(s.Opts.Shards))
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
func HistoryFields(h *History, region string) []any {
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

// backlogTenant is a tenant's field in the backlog hash: the record's tn,
// absent (”) for the default tenant.
func BacklogTenant(tenant string) string {
	if tenant == "default" {
		return ""
	}
	return tenant
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
	for shard := range s.Keys {
		var next *time.Time
		readmitted := 0
		for done := 0; done < limit; {
			n := min(promoteChunk, limit-done)
			budget := o.Readmit
			if budget >= 0 {
				budget = max(0, budget-readmitted)
			}
			out, err := s.Run(ctx, s.RDB, Scripts.promote, s.KeysWith(shard, s.fenceKey(shard, f)),
				s.Clock(), f.Token, n, budget, hot, o.Spread.Milliseconds()).Slice()
			if err != nil {
				return res, fmt.Errorf("queue: promote: %w", err)
			}
			if fenced(out) {
				return res, ErrFenced
			}
			moved := ToInt(out[0])
			res.Moved += moved
			res.Ready += ToInt(out[1])
			if len(out) > 4 {
				res.Deferred += ToInt(out[3])
				readmitted += ToInt(out[4])
			}
			next = msTime(ToStr(out[2]))
			done += moved
			if len(out) > 5 && ToInt(out[5]) == 0 || len(out) <= 5 && moved < n {
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
	for shard := range s.Keys {
		ids, err := s.RDB.ZRange(ctx, s.Keys[shard].Base[2], 0, int64(limit-1)).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: due tasks: %w", err)
		}
		if len(ids) == 0 {
			continue
		}
		p := s.Keys[shard].Prefix
		pipe := s.RDB.Pipeline()
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
			t := r.finish(s.Opts.Defaults)
			t.HeldBy = s.Opts.Region
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
	// Reason of a deferral (Pool ""): NO_CAPACITY (default),
	// NO_HANDLER or DEFERRED_BACKPRESSURE.
	Reason string
}

// PlaceResult counts what Place did.
type PlaceResult struct{ Placed, Deferred, Skipped int }

// Place applies placement decisions to due tasks (leader only), in scripts
// of at most promoteChunk tasks (a placement costs about what a classic
// promotion does, so the same bound keeps each script near 5 ms).
func (s *Maintainer) Place(ctx context.Context, f Fence, as []Assignment) (PlaceResult, error) {
	var res PlaceResult
	byShard := make([][]any, s.Opts.Shards)
	for _, a := range as {
		shard, err := s.ShardOf(a.ID)
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
			argv := append([]any{s.Clock(), f.Token, len(chunk) / 5}, chunk...)
			out, err := s.Run(ctx, s.RDB, Scripts.place, s.KeysWith(shard, s.fenceKey(shard, f), s.Keys[shard].Prefix+"outbox"), argv...).Slice()
			if err != nil {
				return res, fmt.Errorf("queue: place: %w", err)
			}
			if fenced(out) {
				return res, ErrFenced
			}
			res.Placed += ToInt(out[0])
			res.Deferred += ToInt(out[1])
			res.Skipped += ToInt(out[2])
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
	start := int(s.Rr.Add(1))
	if s.Opts.Shards > 1 {
		if k, ok := s.takeOwed(req.Pool, n); ok {
			start = k
		}
	}
	for i := 0; i < s.Opts.Shards && len(out) < n; i++ {
		shard := (start + i) % s.Opts.Shards
		res, err := s.Run(ctx, s.RDB, Scripts.Claim, s.KeysWith(shard, s.Keys[shard].px), s.Clock(), req.Pool, req.Worker,
			n-len(out), s.Opts.Lease.Milliseconds(), s.Opts.AgingStep.Milliseconds(), price,
			s.Opts.Defaults.Timeout.Milliseconds(), served, ClaimSkip).Slice()
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
		now := msTime(ToStr(res[0]))
		first, _ := strconv.ParseInt(ToStr(res[1]), 10, 64)
		paid, _ := strconv.ParseFloat(ToStr(res[2]), 64)
		if p := ToStr(res[3]); p != "" {
			d := time.Duration(ToInt(p)) * time.Millisecond
			if c.Parked == 0 || d < c.Parked {
				c.Parked = max(d, time.Millisecond)
			}
		}
		for j := 4; j+1 < len(res); j += 2 {
			pairs, _ := res[j+1].([]any)
			t := decodePairs(ToStr(res[j]), pairs, s.Opts.Defaults)
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
			t.HeldBy = s.Opts.Region
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
	byShard := make([][]any, s.Opts.Shards)
	var stops []Stop
	for _, l := range held {
		shard, err := s.ShardOf(l.ID)
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
		p := s.Keys[shard].Prefix
		// The types live where the leader reads liveness: shard 0.
		typ := "-"
		if shard == 0 {
			typ = types.code
		}
		argv := append([]any{s.Clock(), worker, s.Opts.Lease.Milliseconds(), slots, len(items) / 2,
			s.Opts.Defaults.Timeout.Milliseconds(), typ}, items...)
		out, err := s.Run(ctx, s.RDB, Scripts.heartbeat, s.KeysWith(shard, p+"workers:"+pool, p+"slots:"+pool,
			p+"types:"+pool), argv...).Slice()
		if err != nil {
			return nil, fmt.Errorf("queue: heartbeat: %w", err)
		}
		for i := 0; i+2 < len(out); i += 3 {
			stops = append(stops, Stop{Lease: Lease{ID: ToStr(out[i]), Token: ToStr(out[i+1])}, Why: StopReason(ToStr(out[i+2]))})
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
	byShard := make([][]int, s.Opts.Shards)
	for i, c := range cs {
		shard, err := s.ShardOf(c.ID)
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
			argv = append(argv, s.Clock(), len(part), s.Opts.RunTimePairs, s.Alpha(), s.Opts.RetainSuccess.Milliseconds())
			for _, i := range part {
				argv = append(argv, cs[i].ID, cs[i].Token, bound(cs[i].Result, cmp.Or(cs[i].MaxResult, task.MaxResultLen)))
			}
			out, err := s.Run(ctx, s.RDB, Scripts.Complete, s.KeysWith(shard, s.Keys[shard].Rt), argv...).Slice()
			if err != nil {
				return nil, fmt.Errorf("queue: complete: %w", err)
			}
			for k, i := range part {
				if ToInt(out[k]) != CodeOK {
					errs[i] = ErrLeaseLost
				}
			}
			if len(out) > len(part)+1 && s.Opts.Shards > 1 {
				s.owe(ToStr(out[len(part)]), shard, ToInt(out[len(part)+1]))
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
	shard, err := s.ShardOf(f.ID)
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
	out, err := s.Run(ctx, s.RDB, Scripts.fail, s.KeysWith(shard, s.Keys[shard].Rt), s.Clock(), f.ID, f.Token,
		clean(f.Error, task.MaxErrorLen), retry, rand.IntN(1000), s.Opts.RetainDead.Milliseconds(),
		s.Opts.RetainCanceled.Milliseconds(), reason, s.Opts.Defaults.MaxRetries,
		s.Opts.Defaults.RetryBase.Milliseconds(), s.Opts.Defaults.RetryCap.Milliseconds(),
		s.Opts.RunTimePairs, s.Alpha()).Slice()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("queue: fail: %w", err)
	}
	if err := leaseResult(f.ID, out); err != nil {
		return "", time.Time{}, err
	}
	var due time.Time
	if t := msTime(ToStr(out[2])); t != nil && ToStr(out[2]) != "0" {
		due = *t
	}
	return StateOf(ToStr(out[1])), due, nil
}

// Return gives a RUNNING task back without spending a retry (graceful
// shutdown, preemption): READY at once with its original enqueue time, or
// after delay.
func (s *Claimer) Return(ctx context.Context, id, token, reason string, delay time.Duration) (task.State, error) {
	shard, err := s.ShardOf(id)
	if err != nil {
		return "", err
	}
	out, err := s.Run(ctx, s.RDB, Scripts.ret, s.KeysWith(shard), s.Clock(), id, token, reason,
		delay.Milliseconds(), s.Opts.RetainCanceled.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: return: %w", err)
	}
	if err := leaseResult(id, out); err != nil {
		return "", err
	}
	return StateOf(ToStr(out[1])), nil
}

func leaseResult(id string, out []any) error {
	switch ToInt(out[0]) {
	case CodeOK:
		return nil
	case codeLeaseLost:
		return fmt.Errorf("%w: task %s is %s", ErrLeaseLost, id, StateOf(ToStr(out[1])))
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
	for shard := range s.Keys {
		out, err := s.Run(ctx, s.RDB, Scripts.reap, s.KeysWith(shard, s.fenceKey(shard, f)), s.Clock(), f.Token,
			limit, rand.IntN(1000), s.Opts.RetainDead.Milliseconds(), s.Opts.RetainCanceled.Milliseconds(),
			s.Opts.Defaults.MaxRetries, s.Opts.Defaults.RetryBase.Milliseconds(), s.Opts.Defaults.RetryCap.Milliseconds(),
			s.Opts.Defaults.Timeout.Milliseconds()).Slice()
		if err != nil {
			return total, next, fmt.Errorf("queue: reap: %w", err)
		}
		if fenced(out) {
			return total, next, ErrFenced
		}
		total += ToInt(out[0])
		if t := msTime(ToStr(out[1])); t != nil && (next.IsZero() || t.Before(next)) {
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
	shard, err := s.ShardOf(id)
	if err != nil {
		return "", err
	}
	if reason == "" {
		reason = task.ReasonCanceledByUser
	}
	out, err := s.Run(ctx, s.RDB, Scripts.cancel, s.KeysWith(shard), s.Clock(), id, reason, by,
		s.Opts.RetainCanceled.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("queue: cancel: %w", err)
	}
	st, err := s.opResult(id, "cancel", out)
	if s.thawedOn(ctx, id, err) {
		return s.Cancel(ctx, id, reason, by)
	}
	return st, err
}

func (s *Engine) opResult(id, op string, out []any) (task.State, error) {
	switch ToInt(out[0]) {
	case CodeOK:
		if len(out) > 1 {
			return StateOf(ToStr(out[1])), nil
		}
		return "", nil
	case codeIllegal:
		return "", &task.TransitionError{ID: id, State: StateOf(ToStr(out[1])), Op: op}
	case codeHandedOff:
		return "", &HandedOffError{ID: id, Region: ToStr(out[1])}
	case codeHandOffInFlight:
		return "", &task.TransitionError{ID: id, State: task.Pending, Op: op, Note: "hand-off to " + ToStr(out[1]) + " in flight"}
	default:
		return "", fmt.Errorf("%w: %s", task.ErrNotFound, id)
	}
}

// Replay puts a dead letter back (FAILED→PENDING) with a fresh retry budget.
// A handed-off task gives a *HandedOffError naming where it lives.
func (s *Tasks) Replay(ctx context.Context, id, by string) error {
	shard, err := s.ShardOf(id)
	if err != nil {
		return err
	}
	out, err := s.Run(ctx, s.RDB, Scripts.replay, s.KeysWith(shard), s.Clock(), id, by).Slice()
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
	shard, err := s.ShardOf(id)
	if err != nil {
		return err
	}
	out, err := s.Run(ctx, s.RDB, Scripts.priority, s.KeysWith(shard), s.Clock(), id, priority, by).Slice()
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
	for shard := range s.Keys {
		out, err := s.Run(ctx, s.RDB, Scripts.sweep, s.KeysWith(shard, s.fenceKey(shard, f)), s.Clock(), f.Token,
			s.Opts.RetainDead.Milliseconds(), clampBatch(limit), s.Opts.RetainSuccess.Milliseconds(), clampBatch(limit),
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
		r.Dead += ToInt(out[0])
		r.Successes += ToInt(out[1])
		r.Left = r.Left || ToInt(out[2]) != 0
		r.Lag = max(r.Lag, time.Duration(ToInt(out[3]))*time.Millisecond)
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
	p := s.Keys[0].Prefix
	out, err := s.Run(ctx, s.RDB, Scripts.workers, s.KeysWith(0, s.fenceKey(0, f), p+"workers:"+pool, p+"slots:"+pool,
		p+"types:"+pool), s.Clock(), f.Token, cutoff.Milliseconds()).Slice()
	if err != nil {
		return PoolWorkers{}, fmt.Errorf("queue: clean workers: %w", err)
	}
	if fenced(out) {
		return PoolWorkers{}, ErrFenced
	}
	pw := PoolWorkers{Removed: ToInt(out[0]), Live: ToInt(out[1]), Slots: ToInt(out[2])}
	if pw.Live == 0 || ToInt(out[3]) != 0 {
		return pw, nil // no worker, or one that may serve any type
	}
	union := map[string]bool{}
	for _, v := range out[4:] {
		for _, t := range splitTypes(ToStr(v)) {
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

func ToInt(v any) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

func ToStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// NewID returns a new id of this region on shard, from the store's generator.
func (s *Engine) NewID(shard int, now time.Time) string {
	return s.Opts.IDs.New(s.Opts.Region, shard, now)
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
func (s *Engine) ReserveBacklog(ctx context.Context, tenant string, max int, ids []string) error {
	byShard, err := s.idsByShard(ids)
	if err != nil {
		return err
	}
	capOf := strconv.Itoa((max + s.Opts.Shards - 1) / s.Opts.Shards)
	tn := BacklogTenant(tenant)
	var done []string
	for shard, sids := range byShard {
		if len(sids) == 0 {
			continue
		}
		argv := make([]any, 0, 4+len(sids))
		argv = append(argv, s.Clock(), "r", tn, capOf)
		for _, id := range sids {
			argv = append(argv, id)
		}
		ok, err := s.Run(ctx, s.RDB, Scripts.backlog, s.KeysWith(shard), argv...).Int()
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
func (s *Engine) UnreserveBacklog(ctx context.Context, ids []string) error {
	byShard, err := s.idsByShard(ids)
	if err != nil {
		return err
	}
	for shard, sids := range byShard {
		if len(sids) == 0 {
			continue
		}
		argv := make([]any, 0, 4+len(sids))
		argv = append(argv, s.Clock(), "u", "", "0")
		for _, id := range sids {
			argv = append(argv, id)
		}
		if err := s.Run(ctx, s.RDB, Scripts.backlog, s.KeysWith(shard), argv...).Err(); err != nil {
			return fmt.Errorf("queue: give back backlog: %w", err)
		}
	}
	return nil
}

// idsByShard groups ids by the shard that holds them.
func (s *Engine) idsByShard(ids []string) ([][]string, error) {
	out := make([][]string, s.Opts.Shards)
	for _, id := range ids {
		shard, err := s.ShardOf(id)
		if err != nil {
			return nil, err
		}
		out[shard] = append(out[shard], id)
	}
	return out, nil
}

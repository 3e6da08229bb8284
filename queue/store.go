package queue

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/queue/record"
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
	ShardsDefault = 1
	PrefixDefault = "ax"
	LeaseDefault  = 10 * time.Second
	// HeartbeatDefault is how often a worker reports the tasks it holds:
	// a few times within LeaseDefault.
	HeartbeatDefault      = 3 * time.Second
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

// Engine is what every stage shares: the client and its shards, the
// options, the key prefixes and the script runner. It is safe for
// concurrent use; the stage packages reach it only through its methods and
// the key functions (keys.go).
type Engine struct {
	rdb    redis.UniversalClient
	opts   Options
	shards []shardKeys
	rr     atomic.Uint32 // NextShard's counter
	fns    functions     // FCALL or EVALSHA (functions.go)
}

type shardKeys struct {
	prefix string
	base   []string // KEYS[1..8] of every script
}

// NewEngine returns the engine over rdb, opts' zero values defaulted.
func NewEngine(rdb redis.UniversalClient, opts Options) (*Engine, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	s := &Engine{rdb: rdb, opts: opts}
	if opts.EvalSHA {
		s.fns.Mode.Store(FnEval)
	}
	for i := 0; i < opts.Shards; i++ {
		p := shardPrefix(opts.Prefix, opts.Region, i)
		base := append(make([]string, 0, 1+len(baseKeySuffixes)), p)
		for _, suf := range baseKeySuffixes {
			base = append(base, p+suf)
		}
		s.shards = append(s.shards, shardKeys{prefix: p, base: base})
	}
	return s, nil
}

// Options returns the engine's effective options (defaults applied); the
// engine never changes them.
func (s *Engine) Options() Options { return s.opts }

// Shards is the number of shards, Options().Shards: at least 1, fixed for
// the engine's life.
func (s *Engine) Shards() int { return s.opts.Shards }

// Client is the underlying Redis client, shared by every stage; callers
// must not close it.
func (s *Engine) Client() redis.UniversalClient { return s.rdb }

// Prefix is the prefix of every key of shard (keys.go), 0 ≤ shard <
// Shards(); the key functions take it.
func (s *Engine) Prefix(shard int) string { return s.shards[shard].prefix }

// NextShard returns the shards in turn, starting anywhere: where a caller
// spreads work (a new task's shard, a claim's first shard).
func (s *Engine) NextShard() int { return int(s.rr.Add(1) % uint32(s.opts.Shards)) }

// Fence identifies a leader-only write: the election and the leader's
// fencing token (the CreateRevision of its election key).
type Fence struct {
	Name  string
	Token int64
}

// Clock is the time argument every script takes: "" (scripts read Redis
// TIME) unless Options.Now is set, then its ms.
func (s *Engine) Clock() string {
	if s.opts.Now == nil {
		return ""
	}
	return strconv.FormatInt(s.opts.Now().UnixMilli(), 10)
}

// Now is Options.Now() when set, else the local clock: the time the Go
// side uses beside the scripts'.
func (s *Engine) Now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// KeysWith returns a new slice of shard's KEYS[1..8] (the keys every
// script takes first, keys.go) followed by extra.
func (s *Engine) KeysWith(shard int, extra ...string) []string {
	k := make([]string, 0, len(s.shards[shard].base)+len(extra))
	k = append(k, s.shards[shard].base...)
	return append(k, extra...)
}

// ShardOf is the shard holding task id, or the error of a malformed id.
func (s *Engine) ShardOf(id string) (int, error) {
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
func (s *Engine) ShardForKey(tenant, key string) int {
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
	// BacklogBytesMax, when > 0, creates the task only while its payload
	// fits beside the payloads of its tenant's unfinished tasks in this
	// region within that many bytes (docs/security.md
	// "max_backlog_bytes"): each shard checks its share, ⌈BacklogBytesMax
	// ÷ shards⌉, atomically in the submit script; else its result is
	// ErrBacklogBytesFull and nothing is stored.
	BacklogBytesMax int64
	// Reserved: room may have been reserved for this id in its tenant's
	// backlog (ReserveBacklog, a DAG run's node): if so the task takes it
	// (it is counted already and not checked), else it is counted as any.
	Reserved bool
	// Supersedes, for a task with a unique key: the key is taken from
	// this task if it still holds it (its home record forwards, and the
	// caller found it past the key's unique_until where it went).
	Supersedes string
	// Budget ("<UTC month> <USD>") is reserved on its ledger if it fits (else submit.ErrBudget); a hand-off's is carried.
	Budget string
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

// Quota is the share of a tenant's submit bucket a batch takes before it
// is stored: N submits from a bucket refilled at PerSecond and holding at
// most Burst. PerSecond ≤ 0 or N ≤ 0 takes nothing.
type Quota struct {
	Tenant    string
	PerSecond float64
	Burst, N  int
}

// QuotaError is a batch its quota stopped before anything of it was
// stored: refused (Err nil; Wait is how long until N submits would fit) or
// the bucket could not be read (Err).
type QuotaError struct {
	Wait time.Duration
	Err  error
}

func (e *QuotaError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return "queue: over the tenant's submit quota"
}

func (e *QuotaError) Unwrap() error { return e.Err }

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

// promoteChunk bounds one promote script. On a Redis holding a million
// tasks a promotion costs about 10 µs a task, so 1 000 in one script would
// block every other client for 10 ms; 500 keep each script near 5 ms. A
// Promote call of up to MaxBatch runs as two scripts then.
const PromoteChunk = 500

// placementFields are the record fields DueTasks reads; st first. Every
// field placement reads is here: the price cap (mp: a task's own, or its
// tenant's budget cap) and the wait target (mw) apply to delayed tasks, DAG
// nodes, schedule slots and re-placed tasks as they do at submit.
var PlacementFields = []string{"st", "ty", "tg", "rg", "pr", "cr", "tn", "tr", "rs", "du", "mp", "mw"}

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
	// Room, when > 0, is the claimer's free room in milli-slots
	// (task.MilliSlots a whole slot): the tasks taken fit it together
	// (task.Task.SlotMilli each) and N only bounds their count. A task
	// that does not fit ends the claim in its place (Claimed.Full).
	// 0: every task counts one of N.
	Room int
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
	// Full: a READY task did not fit the request's Room (it keeps its
	// place): the claimer should claim again once one of its tasks ends,
	// not before.
	Full bool
}

// Lease identifies a held task.
type Lease struct {
	ID, Token string
	// Progress, when not nil, is the attempt's progress to record with
	// the heartbeat (percent 0..100 and message; the store adds the
	// attempt and its clock).
	Progress *task.Progress
}

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

// Completion is a successful attempt to record. Result must be at most
// the region's result limit: the caller checks it (and fails the attempt
// with task.ReasonResultTooLarge when over); the store never cuts it.
type Completion struct {
	ID, Token, Result string
	// Progress, when not nil, is the attempt's last progress, not yet
	// recorded (as Lease.Progress).
	Progress *task.Progress
}

// Failure is a failed attempt to record.
type Failure struct {
	ID, Token string
	Error     string
	Retryable bool
	Reason    string // trail reason of the step; default HANDLER_ERROR
}

// HandedOffError says a task now lives in another region.
type HandedOffError struct{ ID, Region string }

func (e *HandedOffError) Error() string {
	return fmt.Sprintf("queue: task %s was handed off to %s", e.ID, e.Region)
}

func (s *Engine) OpResult(id, op string, out []any) (task.State, error) {
	switch ToInt(out[0]) {
	case CodeOK:
		if len(out) > 1 {
			return record.StateOf(ToStr(out[1])), nil
		}
		return "", nil
	case codeIllegal:
		return "", &task.TransitionError{ID: id, State: record.StateOf(ToStr(out[1])), Op: op}
	case codeHandedOff:
		return "", &HandedOffError{ID: id, Region: ToStr(out[1])}
	case codeHandOffInFlight:
		return "", &task.TransitionError{ID: id, State: task.Pending, Op: op, Note: "hand-off to " + ToStr(out[1]) + " in flight"}
	default:
		return "", fmt.Errorf("%w: %s", task.ErrNotFound, id)
	}
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

func ClampBatch(n int) int {
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
	return s.opts.IDs.New(s.opts.Region, shard, now)
}

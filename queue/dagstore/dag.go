package dagstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

var dagScripts = struct{ create, update, cancel, backlog *queue.Script }{
	backlog: queue.Load("backlog"),
	create:  queue.Load("dag_create"),
	update:  queue.Load("dag_update"),
	cancel:  queue.Load("dag_cancel"),
}

func (s *DAGs) DagKey(id, suffix string) string {
	return s.Options().Prefix + ":{dag:" + id + "}:" + suffix
}

func (s *DAGs) activeDAGs() string { return s.Options().Prefix + ":{dags}:active" }

// CreateDAG stores a new run: RUNNING, every node in its first state
// (initial; nodes left out are WAITING). It fails with ErrExists when a run
// with this id exists. With def.BacklogMax it first reserves room for
// every node's task in the tenant's backlog (ReserveBacklog) and fails
// with ErrBacklogFull, storing nothing, when there is none.
func (s *DAGs) CreateDAG(ctx context.Context, def *queue.DAGDef, initial map[string]queue.DAGNode) error {
	if def.BacklogMax <= 0 {
		return s.createDAG(ctx, def, initial)
	}
	// The definition goes first: a server that dies before the run is
	// stored leaves an id in the active set whose definition names the ids
	// holding room, and the reconciler gives it back (ForgetDAG's caller).
	b, err := json.Marshal(def)
	if err != nil {
		return fmt.Errorf("queue: create DAG: %w", err)
	}
	p, err := task.ParseID(def.ID)
	if err != nil {
		return err
	}
	if err := s.Client().ZAdd(ctx, s.activeDAGs(), redis.Z{Score: float64(p.Time.UnixMilli()), Member: def.ID}).Err(); err != nil {
		return fmt.Errorf("queue: create DAG: %w", err)
	}
	if err := s.Client().Set(ctx, s.DagKey(def.ID, "def"), b, 0).Err(); err != nil {
		return fmt.Errorf("queue: create DAG: %w", err)
	}
	ids := def.TaskIDs()
	if err := s.ReserveBacklog(ctx, def.Tenant, def.BacklogMax, ids); err != nil {
		// Nothing else was stored (should these fail, the reconciler
		// forgets the id).
		ctx := context.WithoutCancel(ctx)
		if s.Client().Del(ctx, s.DagKey(def.ID, "def")).Err() == nil {
			_ = s.Client().ZRem(ctx, s.activeDAGs(), def.ID).Err()
		}
		return err
	}
	if err := s.createDAG(ctx, def, initial); err != nil {
		// Given back even when the run was stored after all (a lost answer):
		// its nodes' tasks are then counted as they are created.
		if uerr := s.UnreserveBacklog(context.WithoutCancel(ctx), ids); uerr != nil {
			return fmt.Errorf("%w (and its backlog reservation stays until the reconciler gives it back: %v)", err, uerr)
		}
		return err
	}
	return nil
}

func (s *DAGs) createDAG(ctx context.Context, def *queue.DAGDef, initial map[string]queue.DAGNode) error {
	p, err := task.ParseID(def.ID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(def)
	if err != nil {
		return fmt.Errorf("queue: create DAG: %w", err)
	}
	// Into the active set first: a run the reconciler does not know of
	// would never move.
	// The index of every run (GET /v1/dags) shares the active set's slot.
	z := redis.Z{Score: float64(p.Time.UnixMilli()), Member: def.ID}
	if _, err := s.Client().TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZAdd(ctx, s.activeDAGs(), z)
		pipe.ZAdd(ctx, s.AllDAGs(), z)
		pipe.ZRemRangeByRank(ctx, s.AllDAGs(), 0, -maxDAGIndex-1)
		return nil
	}); err != nil {
		return fmt.Errorf("queue: create DAG: %w", err)
	}
	argv := make([]any, 0, 5+2*len(def.Nodes))
	argv = append(argv, s.Clock(), string(b), def.Tenant, def.Name, len(def.Nodes))
	for _, n := range def.Nodes {
		st, ok := initial[n.ID]
		if !ok {
			st = queue.DAGNode{State: task.NodeWaiting}
		}
		argv = append(argv, n.ID, st.Value())
	}
	keys := []string{s.DagKey(def.ID, "def"), s.DagKey(def.ID, "run"), s.DagKey(def.ID, "nodes")}
	code, err := s.Run(ctx, s.Client(), dagScripts.create, keys, argv...).Int()
	if err != nil {
		return fmt.Errorf("queue: create DAG: %w", err)
	}
	if code == queue.CodeExists {
		return fmt.Errorf("%w: DAG run %s", task.ErrExists, def.ID)
	}
	return nil
}

// DAGDefinition reads a run's definition.
func (s *DAGs) DAGDefinition(ctx context.Context, id string) (*queue.DAGDef, error) {
	b, err := s.Client().Get(ctx, s.DagKey(id, "def")).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: %s", queue.ErrDAGNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: DAG definition: %w", err)
	}
	var d queue.DAGDef
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("queue: DAG definition %s: %w", id, err)
	}
	return &d, nil
}

// DAG reads a run's state and every node's (one round trip).
func (s *DAGs) DAG(ctx context.Context, id string) (*queue.DAGRun, error) {
	pipe := s.Client().Pipeline()
	rc := pipe.HGetAll(ctx, s.DagKey(id, "run"))
	nc := pipe.HGetAll(ctx, s.DagKey(id, "nodes"))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: DAG: %w", err)
	}
	r := dagRunOf(id, rc.Val(), nc.Val())
	if r == nil {
		return nil, fmt.Errorf("%w: %s", queue.ErrDAGNotFound, id)
	}
	return r, nil
}

// dagRunOf reads a run's hashes (nil: the run is gone).
func dagRunOf(id string, h, nodes map[string]string) *queue.DAGRun {
	if len(h) == 0 {
		return nil
	}
	r := &queue.DAGRun{ID: id, Name: h["nm"], Tenant: h["tn"], State: task.DAGState(h["st"]), FinishedAt: record.MsTime(h["fa"]),
		CancelRequestedAt: record.MsTime(h["cx"]), CanceledBy: h["cb"], Nodes: make(map[string]queue.DAGNode, len(nodes))}
	if t := record.MsTime(h["ct"]); t != nil {
		r.CreatedAt = *t
	}
	for k, v := range nodes {
		r.Nodes[k] = queue.DecodeDAGNode(v)
	}
	return r
}

func (s *DAGs) AllDAGs() string { return s.Options().Prefix + ":{dags}:all" }

// maxDAGIndex bounds the index of runs DAGRunsBefore pages through (the
// oldest leave it first); runs expire on their own retention anyway.
const maxDAGIndex = 200_000

// DAGRunsBefore reads up to limit runs created before the mark (ms and
// id: older, or as old with a smaller id; ms 0 starts at the newest),
// newest first, and whether more are indexed. A run whose keys expired
// leaves the index as it is met.
func (s *DAGs) DAGRunsBefore(ctx context.Context, ms int64, id string, limit int) ([]*queue.DAGRun, bool, error) {
	limit = queue.ClampBatch(limit)
	max := "+inf"
	if ms > 0 {
		max = strconv.FormatInt(ms, 10)
	}
	// Runs of the mark's millisecond at or after its id come back too: ask
	// for a few more and skip them.
	zs, err := s.Client().ZRevRangeByScoreWithScores(ctx, s.AllDAGs(), &redis.ZRangeBy{Max: max, Min: "-inf", Count: int64(limit + 64)}).Result()
	if err != nil {
		return nil, false, fmt.Errorf("queue: DAG runs: %w", err)
	}
	var ids []string
	for _, z := range zs {
		m, _ := z.Member.(string)
		if ms > 0 && int64(z.Score) == ms && m >= id {
			continue
		}
		ids = append(ids, m)
	}
	more := len(ids) > limit
	ids = ids[:min(len(ids), limit)]
	pipe := s.Client().Pipeline()
	runs := make([]*redis.MapStringStringCmd, len(ids))
	nodes := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		runs[i] = pipe.HGetAll(ctx, s.DagKey(id, "run"))
		nodes[i] = pipe.HGetAll(ctx, s.DagKey(id, "nodes"))
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, false, fmt.Errorf("queue: DAG runs: %w", err)
		}
	}
	out := make([]*queue.DAGRun, 0, len(ids))
	var gone []any
	for i, id := range ids {
		if r := dagRunOf(id, runs[i].Val(), nodes[i].Val()); r != nil {
			out = append(out, r)
		} else {
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		s.tidyIndex(ctx, gone)
	}
	return out, more, nil
}

// tidyIndex takes out of the index the runs of gone (no run hash when
// listed) that are not in the active set: expired ones. A run being created
// has no hash yet but is in the active set, which CreateDAG fills with the
// index (or before it) and which loses the run only once it has ended, so
// a listing racing a creation keeps it. Errors leave it to the next
// listing.
func (s *DAGs) tidyIndex(ctx context.Context, gone []any) {
	ids := make([]string, len(gone))
	for i, g := range gone {
		ids[i], _ = g.(string)
	}
	scores, err := s.Client().ZMScore(ctx, s.activeDAGs(), ids...).Result()
	if err != nil || len(scores) != len(ids) {
		return
	}
	var expired []any
	for i, sc := range scores {
		if sc == 0 { // not active: scores are ids' milliseconds, never 0
			expired = append(expired, gone[i])
		}
	}
	if len(expired) > 0 {
		_ = s.Client().ZRem(ctx, s.AllDAGs(), expired...).Err()
	}
}

// dagsIndexed marks that IndexOldDAGRuns went through every run key once:
// runs created since are indexed by CreateDAG.
func (s *DAGs) DagsIndexed() string { return s.Options().Prefix + ":{dags}:indexed" }

// IndexOldDAGRuns adds to the index DAGRunsBefore reads the runs created
// before that index existed (they have a run hash but no index entry). It
// scans the run keys — on every master of a cluster, since each run has its
// own slot — batch keys per SCAN call, adding each batch's runs in one
// ZADD NX, so repeating it (a second leader, a scan cut short by a
// failover) changes nothing. Once a scan went through it marks the region
// indexed, and later calls return at once. It returns how many runs it
// added.
func (s *DAGs) IndexOldDAGRuns(ctx context.Context, batch int) (int, error) {
	if n, err := s.Client().Exists(ctx, s.DagsIndexed()).Result(); err != nil {
		return 0, fmt.Errorf("queue: index DAG runs: %w", err)
	} else if n == 1 {
		return 0, nil
	}
	head, tail := s.Options().Prefix+":{dag:", "}:run"
	var added atomic.Int64 // a cluster's masters are scanned at once
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, head+"*"+tail, int64(max(batch, 1))).Result()
			if err != nil {
				return err
			}
			var zs []redis.Z
			for _, k := range keys {
				id := strings.TrimSuffix(strings.TrimPrefix(k, head), tail)
				if p, err := task.ParseID(id); err == nil && !strings.ContainsAny(id, "{}:") {
					zs = append(zs, redis.Z{Score: float64(p.Time.UnixMilli()), Member: id})
				}
			}
			if len(zs) > 0 {
				n, err := s.Client().ZAddNX(ctx, s.AllDAGs(), zs...).Result()
				if err != nil {
					return err
				}
				added.Add(n)
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc := s.Cluster(); cc != nil {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.Client())
	}
	if err != nil {
		return int(added.Load()), fmt.Errorf("queue: index DAG runs: %w", err)
	}
	if _, err := s.Client().TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZRemRangeByRank(ctx, s.AllDAGs(), 0, -maxDAGIndex-1)
		pipe.Set(ctx, s.DagsIndexed(), "1", 0)
		return nil
	}); err != nil {
		return int(added.Load()), fmt.Errorf("queue: index DAG runs: %w", err)
	}
	return int(added.Load()), nil
}

// ActiveDAGs lists up to limit ids of running DAG runs, oldest first.
func (s *DAGs) ActiveDAGs(ctx context.Context, limit int) ([]string, error) {
	ids, err := s.Client().ZRange(ctx, s.activeDAGs(), 0, int64(queue.ClampBatch(limit)-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: active DAGs: %w", err)
	}
	return ids, nil
}

// ForgetDAG takes an ended (or never created) run out of the active set.
func (s *DAGs) ForgetDAG(ctx context.Context, id string) error {
	if err := s.Client().ZRem(ctx, s.activeDAGs(), id).Err(); err != nil {
		return fmt.Errorf("queue: forget DAG: %w", err)
	}
	return nil
}

// ForgetDAGDefinition deletes the definition of a run that was never
// stored (a create that stopped after its backlog reservation).
func (s *DAGs) ForgetDAGDefinition(ctx context.Context, id string) error {
	if err := s.Client().Del(ctx, s.DagKey(id, "def")).Err(); err != nil {
		return fmt.Errorf("queue: forget DAG: %w", err)
	}
	return nil
}

// UpdateDAG applies node transitions of a run (leader only): each step only
// while its node is still in step.From, and no release once a cancel was
// requested. When every node is settled the run ends — CANCELED when a
// cancel was requested, else SUCCESS, or FAILED when a node FAILED or was
// CANCELED — and its keys expire after the retention of successes, dead
// letters or cancellations. With a cancel requested, steps may be empty:
// the call then only ends the run if every node is settled.
func (s *DAGs) UpdateDAG(ctx context.Context, f queue.Fence, id string, steps []queue.DAGStep) (queue.DAGUpdate, error) {
	argv := make([]any, 0, 6+3*len(steps))
	argv = append(argv, s.Clock(), f.Token, s.Options().RetainSuccess.Milliseconds(), s.Options().RetainDead.Milliseconds(),
		s.Options().RetainCanceled.Milliseconds(), len(steps))
	for _, st := range steps {
		argv = append(argv, st.Node, queue.NodeCodes[st.From], st.To.Value())
	}
	keys := []string{s.DagKey(id, "def"), s.DagKey(id, "run"), s.DagKey(id, "nodes"), s.DagKey(id, "fence:"+f.Name)}
	out, err := s.Run(ctx, s.Client(), dagScripts.update, keys, argv...).Slice()
	if err != nil {
		return queue.DAGUpdate{}, fmt.Errorf("queue: update DAG: %w", err)
	}
	switch {
	case queue.Fenced(out):
		return queue.DAGUpdate{}, queue.ErrFenced
	case queue.DagMissing(out):
		return queue.DAGUpdate{}, fmt.Errorf("%w: %s", queue.ErrDAGNotFound, id)
	}
	return queue.DAGUpdate{Applied: queue.ToInt(out[0]), Released: queue.ToInt(out[1]), State: task.DAGState(queue.ToStr(out[2])), Ended: queue.ToInt(out[3]) == 1,
		Canceling: queue.ToInt(out[4]) == 1}, nil
}

// CancelDAG records a user's cancel of a RUNNING run and moves its WAITING
// nodes to CANCELED (reason CANCELED_BY_USER) at once; by is who asked.
// RELEASED nodes are the caller's to cancel (their tasks, through the task
// cancel path); the leader's next UpdateDAG records their outcomes and ends
// the run CANCELED. A repeat, or a cancel of an ended run, changes nothing
// and says what is. tenant, when not "", must be the run's: another
// tenant's run is ErrDAGNotFound and left untouched.
//
// Unlike UpdateDAG this write is not fenced, and need not be: a cancel is a
// user's request, not a leader's decision that a deposed leader could
// repeat from a stale view. It only ever moves a node out of WAITING, which
// the leader's steps check atomically (compare-and-set), and sets a flag that
// is never cleared, so whatever a leader — current or deposed — writes
// before or after it, no node is released after it and no outcome is lost.
// Only the leader ends the run, so the run's fence key keeps its expiry.
func (s *DAGs) CancelDAG(ctx context.Context, id, tenant, by string) (queue.DAGCancel, error) {
	canceled := queue.DAGNode{State: task.NodeCanceled, Reason: task.ReasonCanceledByUser}
	keys := []string{s.DagKey(id, "run"), s.DagKey(id, "nodes")}
	out, err := s.Run(ctx, s.Client(), dagScripts.cancel, keys, s.Clock(), tenant, by, canceled.Value()).Slice()
	if err != nil {
		return queue.DAGCancel{}, fmt.Errorf("queue: cancel DAG: %w", err)
	}
	if queue.DagMissing(out) {
		return queue.DAGCancel{}, fmt.Errorf("%w: %s", queue.ErrDAGNotFound, id)
	}
	return queue.DAGCancel{First: queue.ToInt(out[0]) == 1, Canceled: queue.ToInt(out[1]), State: task.DAGState(queue.ToStr(out[2])),
		RequestedAt: record.MsTime(queue.ToStr(out[3]))}, nil
}

package store_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/claim"
	"github.com/ax-sched/ax/queue/dagstore"
	"github.com/ax-sched/ax/queue/handoffs"
	"github.com/ax-sched/ax/queue/maint"
	"github.com/ax-sched/ax/queue/read"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/queue/submit"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// fakeClock is a settable clock injected into scripts.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var leader = queue.Fence{Name: "region", Token: 10}

// TestMain runs the suite against one Redis per test, or with
// AX_TEST_REDIS=cluster against a real 3-master Redis Cluster (testenv.Main).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m).Run()) }

type env struct {
	t   *testing.T
	ctx context.Context
	// rdb reaches every key of the test's Redis: a client of the test's
	// redis-server, or of the shared cluster (testenv.ModeEnv).
	rdb   redis.UniversalClient
	flush func(context.Context) error
	s     *stageSet
	clock *fakeClock
}

// stageSet is every stage of one Store, so a test reaches each operation
// as e.s.Op (the engine's fields and helpers first).
type stageSet struct {
	*queue.Engine
	*submit.Submitter
	*claim.Claimer
	*maint.Maintainer
	*handoffs.HandOffs
	*read.Tasks
	*dagstore.DAGs
	store *store.Store
}

func allStages(s *store.Store) *stageSet {
	return &stageSet{Engine: s.Engine, Submitter: s.Submitter(), Claimer: s.Claimer(), Maintainer: s.Maintainer(),
		HandOffs: s.HandOffs(), Tasks: s.Tasks(), DAGs: s.DAGs(), store: s}
}

// newEnv builds a store (region eu-west, a fake clock) on a Redis of the
// test's own, or in cluster mode on the shared 3-master cluster with 3
// shards (mod may change the shard count).
func newEnv(t *testing.T, mod ...func(*queue.Options)) *env {
	t.Helper()
	clock := newFakeClock()
	opts := queue.Options{Region: "eu-west", Now: clock.Now}
	e := &env{t: t, clock: clock}
	if c := testenv.SuiteCluster(t); c != nil {
		e.rdb, e.flush = c.Client(t), c.Flush
		opts.Shards = testenv.SuiteMasters
	} else {
		r := testenv.StartRedis(t)
		e.rdb, e.flush = r.Client(), r.Flush
	}
	for _, m := range mod {
		m(&opts)
	}
	s, err := store.New(e.rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e.ctx, e.s = ctx, allStages(s)
	return e
}

// keys lists the keys matching pattern on every master.
func (e *env) keys(pattern string) []string {
	e.t.Helper()
	var out []string
	var mu sync.Mutex
	each := func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, pattern).Result()
		mu.Lock()
		out = append(out, ks...)
		mu.Unlock()
		return err
	}
	var err error
	switch c := e.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(e.ctx, each)
	case *redis.Client:
		err = each(e.ctx, c)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// oneShard keeps a test's store on one shard, in cluster mode too
// (where newEnv gives it three), for tests of what holds within a shard:
// strict priority order, per-shard batch bounds and caps.
func oneShard(o *queue.Options) { o.Shards = 1 }

// shardPrefix is the key prefix of the shard holding id.
func (e *env) shardPrefix(id string) string {
	e.t.Helper()
	sh, err := e.s.ShardOf(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.s.Prefix(sh)
}

func (e *env) spec(mod ...func(*task.Spec)) *task.Spec {
	e.t.Helper()
	sp := &task.Spec{Type: "test.noop", Payload: []byte(`{"n":1}`)}
	for _, m := range mod {
		m(sp)
	}
	if err := sp.Normalize(task.DefaultDefaults(), e.clock.Now()); err != nil {
		e.t.Fatal(err)
	}
	return sp
}

func prio(p int) func(*task.Spec) { return func(s *task.Spec) { s.Priority = &p } }

func retries(n int) func(*task.Spec) { return func(s *task.Spec) { s.MaxRetries = &n } }

func delay(d time.Duration) func(*task.Spec) {
	return func(s *task.Spec) { s.Delay = task.Duration(d) }
}

// submit accepts one task into pool ("" = unplaced) and returns its id.
func (e *env) submit(pool string, mod ...func(*task.Spec)) string {
	e.t.Helper()
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(mod...), Pool: pool, Pinned: pool != ""})
	if err != nil || res[0].Err != nil {
		e.t.Fatalf("submit: %v %v", err, res)
	}
	return res[0].ID
}

func (e *env) state(id string) task.State {
	e.t.Helper()
	tk, err := e.s.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return tk.State
}

func (e *env) claim(pool string, n int) []*task.Task {
	e.t.Helper()
	ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: pool, Worker: "w1", N: n})
	if err != nil {
		e.t.Fatal(err)
	}
	return ts
}

func (e *env) claimOne(pool string) *task.Task {
	e.t.Helper()
	ts := e.claim(pool, 1)
	if len(ts) != 1 {
		e.t.Fatalf("claim: got %d tasks, want 1", len(ts))
	}
	return ts[0]
}

// newStages is New with every stage at hand.
func newStages(rdb redis.UniversalClient, opts queue.Options) (*stageSet, error) {
	s, err := store.New(rdb, opts)
	if err != nil {
		return nil, err
	}
	return allStages(s), nil
}

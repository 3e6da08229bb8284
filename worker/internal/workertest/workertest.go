package workertest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/redis/go-redis/v9"
)

// Pool is the pool every test worker serves.
const Pool = "cpu"

// Lease is the store's lease in tests: short, so lost leases show quickly,
// and ten heartbeats (Heartbeat) long, so a slow race-enabled run keeps them.
const (
	Lease     = time.Second
	Heartbeat = 100 * time.Millisecond
)

// Env is one Redis and a store over it.
type Env struct {
	T   testing.TB
	Ctx context.Context
	// Redis is the test's own redis-server; nil in cluster mode
	// (testenv.ModeEnv), where Store is on the shared cluster.
	Redis *testenv.Redis
	Store *store.Store
}

// New starts a Redis and a store (region eu-west, lease Lease); in
// cluster mode (testenv.ModeEnv=cluster, with testenv.Main in TestMain) the
// store is on the shared 3-master cluster with 3 shards instead, and opts
// are not used.
func New(t testing.TB, opts ...testenv.RedisOptions) *Env {
	t.Helper()
	var rdb redis.UniversalClient
	o := queue.Options{Region: "eu-west", Lease: Lease}
	var r *testenv.Redis
	if c := testenv.SuiteCluster(t); c != nil {
		rdb, o.Shards = c.Client(t), testenv.SuiteMasters
	} else {
		r = testenv.StartRedis(t, opts...)
		rdb = r.Client()
	}
	s, err := store.New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if err := s.Client().Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	return &Env{T: t, Ctx: ctx, Redis: r, Store: s}
}

// Spec options.
func Retries(n int) func(*task.Spec) { return func(s *task.Spec) { s.MaxRetries = &n } }

// FastRetry makes backoff 10–20ms, so retries run within a test.
func FastRetry(s *task.Spec) {
	s.RetryBase = task.Duration(10 * time.Millisecond)
	s.RetryCap = task.Duration(20 * time.Millisecond)
}

func Timeout(d time.Duration) func(*task.Spec) {
	return func(s *task.Spec) { s.Timeout = task.Duration(d) }
}

// Submit accepts n tasks of typ pinned to Pool and returns their ids.
func (e *Env) Submit(typ string, payload any, n int, mod ...func(*task.Spec)) []string {
	e.T.Helper()
	var raw json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			e.T.Fatal(err)
		}
		raw = b
	}
	tasks := make([]queue.NewTask, n)
	for i := range tasks {
		sp := &task.Spec{Type: typ, Payload: raw}
		for _, m := range mod {
			m(sp)
		}
		if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
			e.T.Fatal(err)
		}
		tasks[i] = queue.NewTask{Spec: sp, Pool: Pool, Pinned: true}
	}
	res, err := e.Store.Submitter().Submit(e.Ctx, tasks...)
	if err != nil {
		e.T.Fatal(err)
	}
	ids := make([]string, n)
	for i, r := range res {
		if r.Err != nil {
			e.T.Fatal(r.Err)
		}
		ids[i] = r.ID
	}
	return ids
}

// SubmitOne accepts one task and returns its id.
func (e *Env) SubmitOne(typ string, payload any, mod ...func(*task.Spec)) string {
	e.T.Helper()
	return e.Submit(typ, payload, 1, mod...)[0]
}

// Worker returns a worker for Pool with test defaults (Heartbeat, logs at
// warning level to the test log) under opts.
func (e *Env) Worker(opts worker.Options) *worker.Worker {
	e.T.Helper()
	if opts.Pool == "" {
		opts.Pool = Pool
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = Heartbeat
	}
	if opts.Logger == nil {
		opts.Logger = Logger(e.T, slog.LevelWarn)
	}
	w, err := worker.New(e.Store.Claimer(), opts)
	if err != nil {
		e.T.Fatal(err)
	}
	return w
}

// Run starts w.Run and returns stop, which cancels it, waits for Run to
// return and reports how long that took. stop also runs at cleanup.
func (e *Env) Run(w *worker.Worker) (stop func() time.Duration) {
	e.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var took time.Duration
	stop = func() time.Duration {
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				took = time.Since(start)
				if err != nil {
					e.T.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				e.T.Errorf("Run did not return within 30s of cancel")
			}
		})
		return took
	}
	e.T.Cleanup(func() { stop() })
	return stop
}

// Leader stands in for the region leader: every 10ms until stop (or
// cleanup) it promotes due retries and reaps expired leases.
func (e *Env) Leader() (stop func()) { return e.leader(true) }

// Promoter is Leader without the reaper: only the worker settles its
// attempts, so a test of what the worker records (a timeout at the
// attempt's deadline, when the lease ends too) is not raced by a reap.
func (e *Env) Promoter() (stop func()) { return e.leader(false) }

func (e *Env) leader(reap bool) (stop func()) {
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = e.Store.Maintainer().Promote(ctx, queue.Fence{Name: "t", Token: 1}, 1000)
				if reap {
					_, _, _ = e.Store.Maintainer().Reap(ctx, queue.Fence{Name: "t", Token: 1}, 1000)
				}
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.T.Cleanup(stop)
	return stop
}

// Get reads a task.
func (e *Env) Get(id string) *task.Task {
	e.T.Helper()
	tk, err := e.Store.Get(e.Ctx, id)
	if err != nil {
		e.T.Fatal(err)
	}
	return tk
}

// WaitState waits until task id is in state st and returns it.
func (e *Env) WaitState(id string, st task.State, within time.Duration) *task.Task {
	e.T.Helper()
	var tk *task.Task
	Eventually(e.T, within, "task "+id+" in state "+string(st), func() bool {
		tk = e.Get(id)
		return tk.State == st
	})
	return tk
}

// Trail returns a task's transitions.
func (e *Env) Trail(id string) []task.Transition {
	e.T.Helper()
	tr, err := e.Store.Tasks().Trail(e.Ctx, id)
	if err != nil {
		e.T.Fatal(err)
	}
	return tr
}

// Step returns the first trail entry with reason, or nil.
func (e *Env) Step(id, reason string) *task.Transition {
	e.T.Helper()
	for _, tr := range e.Trail(id) {
		if tr.Reason == reason {
			return &tr
		}
	}
	return nil
}

// Eventually polls cond every 5ms until it holds, failing after within.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Logger writes records at or above level to the test log.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = testWriter{}

package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
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

var leader = Fence{Name: "region", Token: 10}

type env struct {
	t     *testing.T
	ctx   context.Context
	redis *testenv.Redis
	s     *Store
	clock *fakeClock
}

func newEnv(t *testing.T, mod ...func(*Options)) *env {
	t.Helper()
	r := testenv.StartRedis(t)
	clock := newFakeClock()
	opts := Options{Region: "eu-west", Now: clock.Now}
	for _, m := range mod {
		m(&opts)
	}
	s, err := New(r.Client(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, ctx: ctx, redis: r, s: s, clock: clock}
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
	res, err := e.s.Submit(e.ctx, NewTask{Spec: e.spec(mod...), Pool: pool, Pinned: pool != ""})
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
	ts, err := e.s.Claim(e.ctx, ClaimRequest{Pool: pool, Worker: "w1", N: n})
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

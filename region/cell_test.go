package region

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
)

type harness struct {
	t     *testing.T
	etcd  *testenv.Etcd
	redis *testenv.Redis
	store *store.Store
}

func newHarness(t *testing.T) *harness {
	e := testenv.StartEtcd(t)
	r := testenv.StartRedis(t)
	s, err := store.New(r.Client(), queue.Options{Region: "eu-west"})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, etcd: e, redis: r, store: s}
}

// startCell runs a cell until the returned stop is called.
func (h *harness) startCell(id string, m *Metrics, mod ...func(*Config)) (*Cell, func()) {
	cfg := Config{
		Region: "eu-west", ID: id, API: "http://" + id, SessionTTL: 2 * time.Second,
		Heartbeat: 500 * time.Millisecond, PublishInterval: 300 * time.Millisecond,
		Pools: []Pool{{Name: "cpu", QueueCapacity: 100, PricePerSlotHour: 0.05}},
	}
	for _, f := range mod {
		f(&cfg)
	}
	c := New(h.store, h.etcd.Client(), nil, cfg, m)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx, waitPlacer{}) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	h.t.Cleanup(stop)
	return c, stop
}

// waitPlacer places nothing: the cell's tests submit their tasks pinned to
// a pool, so none waits for placement (the federation's placement is
// tested through federation.Node, the one Placer).
type waitPlacer struct{}

func (waitPlacer) PlaceDue(_ context.Context, ts []*task.Task) []queue.Assignment {
	out := make([]queue.Assignment, len(ts))
	for i, t := range ts {
		out[i] = queue.Assignment{ID: t.ID, RetryAt: time.Now().Add(time.Second)}
	}
	return out
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", within, what)
	return 0
}

func (h *harness) submitDelayed(d time.Duration) string {
	sp := &task.Spec{Type: "t", Delay: task.Duration(d)}
	if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
		h.t.Fatal(err)
	}
	res, err := h.store.Submitter().Submit(context.Background(), queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true})
	if err != nil {
		h.t.Fatal(err)
	}
	return res[0].ID
}

func (h *harness) state(id string) task.State {
	tk, err := h.store.Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return tk.State
}

func TestOneLeaderAndFailoverKeepsPromoting(t *testing.T) {
	h := newHarness(t)
	a, stopA := h.startCell("a", nil)
	b, stopB := h.startCell("b", nil)
	waitFor(t, 10*time.Second, "a leader", func() bool { return a.Leading() || b.Leading() })
	time.Sleep(200 * time.Millisecond)
	if a.Leading() && b.Leading() {
		t.Fatal("two leaders")
	}
	leader, stopLeader, standby := a, stopA, b
	if b.Leading() {
		leader, stopLeader, standby = b, stopB, a
	}
	id := h.submitDelayed(300 * time.Millisecond)
	waitFor(t, 3*time.Second, "promotion by the first leader", func() bool { return h.state(id) == task.Ready })
	stopLeader() // resigns: the standby takes over at once
	took := waitFor(t, 4*time.Second, "standby leads", standby.Leading)
	t.Logf("takeover after graceful stop: %v", took)
	if leader.Leading() {
		t.Fatal("the stopped cell still says it leads")
	}
	id2 := h.submitDelayed(200 * time.Millisecond)
	waitFor(t, 3*time.Second, "promotion by the new leader", func() bool { return h.state(id2) == task.Ready })
}

func TestFencedLeaderResigns(t *testing.T) {
	h := newHarness(t)
	m := NewMetrics(nil)
	a, _ := h.startCell("a", m)
	waitFor(t, 10*time.Second, "a leads", a.Leading)
	// A newer leader's token reaches Redis first (as after a stall).
	ctx := context.Background()
	if _, err := h.store.Maintainer().Promote(ctx, queue.Fence{Name: "region", Token: a.token.Load() + 1000}, 1); err != nil {
		t.Fatal(err)
	}
	id := h.submitDelayed(100 * time.Millisecond)
	waitFor(t, 5*time.Second, "a resigns", func() bool { return m.FencedRejections("eu-west") >= 1 })
	// a campaigns again and gets a higher token only from etcd: still below
	// the fence, so nothing is promoted by it.
	time.Sleep(500 * time.Millisecond)
	if st := h.state(id); st != task.Pending {
		t.Fatalf("a fenced leader promoted a task: %s", st)
	}
}

func TestPublishesFigures(t *testing.T) {
	h := newHarness(t)
	a, _ := h.startCell("a", nil)
	waitFor(t, 10*time.Second, "a leads", a.Leading)
	ctx := context.Background()
	if _, err := h.store.Claimer().Heartbeat(ctx, "w1", "cpu", 8, queue.Types{}, nil); err != nil {
		t.Fatal(err)
	}
	h.submitDelayed(0)
	cli := h.etcd.Client()
	var f Figures
	waitFor(t, 5*time.Second, "published figures with slots", func() bool {
		r, err := cli.Get(ctx, "/ax/regions/eu-west")
		if err != nil || len(r.Kvs) == 0 {
			return false
		}
		_ = json.Unmarshal(r.Kvs[0].Value, &f)
		return len(f.Pools) == 1 && f.Pools[0].Slots == 8 && f.Pools[0].Ready == 1
	})
	if f.Leader != "a" || f.API != "http://a" || f.Pools[0].QueueFill() != 0.01 {
		t.Fatalf("figures %+v", f)
	}
	// A dead worker is forgotten and its slots leave the figures.
	waitFor(t, 5*time.Second, "dead worker forgotten", func() bool { return a.Figures().Pools[0].Slots == 0 })
}

// A pool publishes its configured slots capped by its live workers'
// concurrency; workers offering more than configured are a warning, once
// per change of their sum.
func TestPublishedSlotsCappedByConfigAndWorkers(t *testing.T) {
	h := newHarness(t)
	var logs syncBuffer
	a, _ := h.startCell("a", nil, func(c *Config) {
		c.Pools[0].Slots = 8
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	waitFor(t, 10*time.Second, "a leads", a.Leading)
	ctx := context.Background()
	beat := func(id string, n int) {
		t.Helper()
		if _, err := h.store.Claimer().Heartbeat(ctx, id, "cpu", n, queue.Types{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	slots := func() int {
		if f := a.Figures(); len(f.Pools) == 1 {
			return f.Pools[0].Slots
		}
		return -1
	}
	warnings := func() int { return strings.Count(logs.String(), "more slots than configured") }
	beat("w1", 6)
	waitFor(t, 5*time.Second, "6 live slots published", func() bool { return slots() == 6 })
	beat("w2", 6) // 12 live for 8 configured
	waitFor(t, 5*time.Second, "the configured 8 published", func() bool { beat("w1", 6); beat("w2", 6); return slots() == 8 && warnings() == 1 })
	for range 4 { // further publications of the same mismatch: no new warning
		beat("w1", 6)
		beat("w2", 6)
		time.Sleep(300 * time.Millisecond)
	}
	if n := warnings(); n != 1 || slots() != 8 {
		t.Fatalf("%d warnings, %d slots published; want 1 warning, 8 slots", n, slots())
	}
	beat("w2", 10) // the sum changed: warned again
	waitFor(t, 5*time.Second, "a second warning", func() bool { beat("w1", 6); beat("w2", 10); return warnings() == 2 && slots() == 8 })
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

package region

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

func (h *harness) submitPinned(mod func(*task.Spec)) string {
	sp := &task.Spec{Type: "t"}
	if mod != nil {
		mod(sp)
	}
	if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
		h.t.Fatal(err)
	}
	res, err := h.store.Submitter().Submit(context.Background(), queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true})
	if err != nil || res[0].Err != nil {
		h.t.Fatal(err, res)
	}
	return res[0].ID
}

func prioDelay(p int, d time.Duration, critical bool) func(*task.Spec) {
	return func(s *task.Spec) {
		s.Priority = &p
		s.Delay = task.Duration(d)
		s.Critical = critical
	}
}

func (h *harness) drain(n int) {
	ctx := context.Background()
	for n > 0 {
		ts, err := h.store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "drainer", N: min(n, 100)})
		if err != nil || len(ts) == 0 {
			h.t.Fatalf("drain: %v (%d)", err, len(ts))
		}
		var cs []queue.Completion
		for _, t := range ts {
			cs = append(cs, queue.Completion{ID: t.ID, Token: t.LeaseToken})
		}
		if _, err := h.store.Claimer().Complete(ctx, cs...); err != nil {
			h.t.Fatal(err)
		}
		n -= len(ts)
	}
}

func hasReason(tr []task.Transition, reason string) bool {
	for _, x := range tr {
		if x.Reason == reason {
			return true
		}
	}
	return false
}

// A pool past 95 % stops promoting priorities 3–4 until it is back under
// 40 %; critical and higher-priority tasks are still promoted; the pause
// lifts once queued work drains.
func TestBackpressurePausesLowPrioritiesWithHysteresis(t *testing.T) {
	testenv.Slow(t)
	h := newHarness(t)
	m := NewMetrics(nil)
	c, _ := h.startCell("a", m)
	waitFor(t, 10*time.Second, "leader", c.Leading)
	for i := 0; i < 96; i++ { // capacity 100: fill 0.96
		h.submitPinned(nil)
	}
	waitFor(t, 5*time.Second, "paused", func() bool { return c.pressureLevel("cpu") == 3 })
	var low []string
	for i := 0; i < 5; i++ {
		low = append(low, h.submitPinned(prioDelay(4, 200*time.Millisecond, false)))
	}
	crit := h.submitPinned(prioDelay(4, 200*time.Millisecond, true))
	high := h.submitPinned(prioDelay(1, 200*time.Millisecond, false))
	waitFor(t, 5*time.Second, "critical and priority-1 promoted", func() bool {
		return h.state(crit) == task.Ready && h.state(high) == task.Ready
	})
	// Drain to a fill of 0.6: between resume and pause, still paused.
	h.drain(38)
	time.Sleep(1500 * time.Millisecond)
	if lvl := c.pressureLevel("cpu"); lvl != 3 {
		t.Fatalf("at fill 0.60 the pause must hold (hysteresis); level %d", lvl)
	}
	for _, id := range low {
		if st := h.state(id); st != task.Pending {
			t.Fatalf("low-priority task %s promoted while paused: %s", id, st)
		}
	}
	// Under 40 %: the pause lifts and the deferred work comes in.
	h.drain(25)
	waitFor(t, 15*time.Second, "deferred low priorities promoted", func() bool {
		for _, id := range low {
			if h.state(id) != task.Ready {
				return false
			}
		}
		return true
	})
	tr, _ := h.store.Tasks().Trail(context.Background(), low[0])
	if !hasReason(tr, task.ReasonDeferred) {
		t.Fatalf("trail lacks DEFERRED_BACKPRESSURE: %+v", tr)
	}
	if lvl := c.pressureLevel("cpu"); lvl == 3 {
		t.Fatal("still paused below resume")
	}
}

// A priority-0 task in a full pool preempts a preemptible priority-3 task,
// never a priority-1 or a non-preemptible one; the victim keeps its retry
// budget and its enqueue time; the preemptor gets the slot.
func TestPreemption(t *testing.T) {
	h := newHarness(t)
	m := NewMetrics(nil)
	c, _ := h.startCell("a", m, func(cfg *Config) { cfg.Preemption.Wait = 300 * time.Millisecond })
	waitFor(t, 10*time.Second, "leader", c.Leading)
	var mu sync.Mutex
	started := map[string]time.Time{}
	w, err := worker.New(h.store.Claimer(), worker.Options{Pool: "cpu", ID: "w", Concurrency: 3, Heartbeat: 300 * time.Millisecond,
		PreemptDelayMin: 500 * time.Millisecond, PreemptDelayMax: time.Second, ShutdownGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("t", func(ctx context.Context, tk *worker.Task) error {
		mu.Lock()
		started[tk.ID] = time.Now()
		mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	p := func(prio int, preemptible bool) func(*task.Spec) {
		return func(s *task.Spec) { s.Priority = &prio; s.Preemptible = preemptible }
	}
	a := h.submitPinned(p(1, true))  // gap too small
	b := h.submitPinned(p(3, false)) // not preemptible
	victim := h.submitPinned(p(3, true))
	waitFor(t, 5*time.Second, "three running", func() bool { return len(startedCopy(&mu, started)) == 3 })
	victimTask, _ := h.store.Get(context.Background(), victim)
	urgent := h.submitPinned(p(0, false))
	waitFor(t, 10*time.Second, "the preemptor runs", func() bool { _, ok := startedCopy(&mu, started)[urgent]; return ok })
	for _, id := range []string{a, b} {
		if st := h.state(id); st != task.Running {
			t.Fatalf("task %s was disturbed: %s", id, st)
		}
	}
	got, _ := h.store.Get(context.Background(), victim)
	if got.State != task.Pending && got.State != task.Ready {
		t.Fatalf("victim state %s", got.State)
	}
	if got.Attempts != 0 || got.PreemptCount != 1 || !got.EnqueuedAt.Equal(*victimTask.EnqueuedAt) {
		t.Fatalf("victim lost a retry or its place: attempts %d preempts %d enq %v→%v",
			got.Attempts, got.PreemptCount, victimTask.EnqueuedAt, got.EnqueuedAt)
	}
	tr, _ := h.store.Tasks().Trail(context.Background(), victim)
	if !hasReason(tr, task.ReasonPreemptRequested) || !hasReason(tr, task.ReasonPreempted) {
		t.Fatalf("victim trail: %+v", tr)
	}
	if n := m.Preemptions("eu-west", "cpu", Preempted); n != 1 {
		t.Fatalf("%v preemptions, want 1", n)
	}
}

func startedCopy(mu *sync.Mutex, m map[string]time.Time) map[string]time.Time {
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// 100 preempted tasks coming back at once are re-admitted at ≤ 10/s.
func TestPreemptedWorkReadmittedAtRate(t *testing.T) {
	testenv.Slow(t)
	h := newHarness(t)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		h.submitPinned(func(s *task.Spec) { s.Payload = json.RawMessage(`{}`) })
	}
	ts, err := h.store.Claimer().Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 100})
	if err != nil || len(ts) != 100 {
		t.Fatal(err, len(ts))
	}
	for _, tk := range ts {
		if _, err := h.store.Claimer().Return(ctx, tk.ID, tk.LeaseToken, task.ReasonPreempted, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := h.startCell("a", nil)
	waitFor(t, 10*time.Second, "leader", c.Leading)
	start := time.Now()
	var last int
	for last < 100 {
		time.Sleep(250 * time.Millisecond)
		cn, _ := h.store.Tasks().Counts(ctx)
		last = cn.Ready
		el := time.Since(start).Seconds()
		if limit := 10 + 10*el + 3; float64(last) > limit {
			t.Fatalf("%d re-admitted after %.1fs; the limit allows %.0f", last, el, limit)
		}
		if el > 20 {
			t.Fatalf("only %d re-admitted after 20 s", last)
		}
	}
	t.Logf("100 preempted tasks re-admitted in %v", time.Since(start))
}

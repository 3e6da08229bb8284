package worker_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

func ok(context.Context, *worker.Task) error { return nil }

// Two workers of one pool with different handlers: each task runs once, on
// the worker that serves its type, at its first attempt; a type nobody
// serves stays READY untouched (not dead-lettered) until a catch-all worker
// comes.
func TestWorkersClaimOnlyTheTypesTheyServe(t *testing.T) {
	e := wt.New(t)
	wa := e.Worker(worker.Options{ID: "wa", Concurrency: 4})
	wa.Handle("custom.a", ok)
	wb := e.Worker(worker.Options{ID: "wb", Concurrency: 4})
	wb.Handle("noop", ok)
	wb.Handle("sleep", ok)
	e.Run(wa)
	e.Run(wb)
	var as, bs []string
	for range 20 {
		as = append(as, e.SubmitOne("custom.a", nil))
		bs = append(bs, e.SubmitOne("noop", nil))
	}
	orphans := e.Submit("custom.c", nil, 5)
	wt.Eventually(t, 20*time.Second, "40 tasks succeeded", func() bool {
		c, err := e.Store.Tasks().Counts(e.Ctx)
		return err == nil && c.Succeeded == 40
	})
	for _, c := range []struct {
		ids    []string
		worker string
	}{{as, "wa"}, {bs, "wb"}} {
		for _, id := range c.ids {
			if tk := e.Get(id); tk.State != task.Success || tk.Worker != c.worker || tk.Attempts != 1 {
				t.Fatalf("%s: %s on %s after %d attempts, want SUCCESS on %s at the first", tk.Type, tk.State, tk.Worker, tk.Attempts, c.worker)
			}
		}
	}
	for _, id := range orphans {
		if tk := e.Get(id); tk.State != task.Ready || tk.Attempts != 0 {
			t.Fatalf("a task nobody serves: %s after %d attempts, want READY untouched", tk.State, tk.Attempts)
		}
	}
	if c, _ := e.Store.Tasks().Counts(e.Ctx); c.Failed != 0 {
		t.Fatalf("%d tasks failed", c.Failed)
	}
	wc := e.Worker(worker.Options{ID: "wc", Concurrency: 2})
	var seen []string
	done := make(chan string, len(orphans))
	wc.HandleAny(func(_ context.Context, t *worker.Task) error { done <- t.Type; return nil })
	e.Run(wc)
	for range orphans {
		seen = append(seen, recv(t, done, 5*time.Second, "the catch-all runs the orphans"))
	}
	if d := cmp.Diff([]string{"custom.c", "custom.c", "custom.c", "custom.c", "custom.c"}, seen); d != "" {
		t.Fatal(d)
	}
	for _, id := range orphans {
		e.WaitState(id, task.Success, 5*time.Second)
	}
}

// The heartbeat publishes the registered types, and a handler registered
// while the worker runs joins them; a catch-all makes the pool serve any
// type.
func TestHeartbeatPublishesServedTypes(t *testing.T) {
	e := wt.New(t)
	w := e.Worker(worker.Options{ID: "w1", Concurrency: 1})
	w.Handle("b.type", ok)
	w.Handle("a.type", ok)
	e.Run(w)
	types := func() []string {
		pw, err := e.Store.Maintainer().CleanWorkers(e.Ctx, queue.Fence{Name: "t", Token: 1}, wt.Pool, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return pw.Types
	}
	wt.Eventually(t, 5*time.Second, "the pool serves a.type and b.type", func() bool {
		return cmp.Equal(types(), []string{"a.type", "b.type"})
	})
	w.Handle("c.type", ok)
	wt.Eventually(t, 5*time.Second, "c.type joins", func() bool {
		return cmp.Equal(types(), []string{"a.type", "b.type", "c.type"})
	})
	any := e.Worker(worker.Options{ID: "w2", Concurrency: 1})
	any.HandleAny(ok)
	e.Run(any)
	wt.Eventually(t, 5*time.Second, "the pool serves any type", func() bool { return types() == nil })
}

func TestHandleRejectsBadTypes(t *testing.T) {
	e := wt.New(t)
	panics := func(what string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), what) {
				t.Fatalf("panic %v, want one naming %q", r, what)
			}
		}()
		f()
	}
	w := e.Worker(worker.Options{})
	panics("required", func() { w.Handle("", ok) })
	panics("letters, digits", func() { w.Handle("a,b", ok) })
	panics("letters, digits", func() { w.Handle("*", ok) })
	panics("needs a handler", func() { w.Handle("x", nil) })
	for i := range queue.MaxWorkerTypes {
		w.Handle(fmt.Sprintf("t%d", i), ok)
	}
	panics("at most 64", func() { w.Handle("one.more", ok) })
	if got := len(w.Types().List()); got != queue.MaxWorkerTypes {
		t.Fatalf("%d types after the refused one, want %d", got, queue.MaxWorkerTypes)
	}
	w.HandleAny(ok)
	w.Handle("one.more", ok) // past the cap is fine with a catch-all
	if !w.Types().All() {
		t.Fatal("a catch-all serves every type")
	}
	panics("twice", func() { w.HandleAny(ok) })
}

// Tasks of a type this worker does not serve, and nobody takes, make every
// claim pass them over and leave a wake-up: the worker must back off
// instead of taking its own wake-up back in a loop. A spin is thousands of
// claims in two seconds; the backoff (20ms doubling to IdleWait) is about
// ten.
func TestPassedOverWorkDoesNotSpin(t *testing.T) {
	e := wt.New(t)
	e.Submit("not.mine", nil, 50)
	w := e.Worker(worker.Options{Concurrency: 4})
	w.Handle("mine", ok)
	before := scriptCalls(t, e)
	e.Run(w)
	time.Sleep(2 * time.Second)
	// Script calls: claims, and heartbeats (one per 100ms).
	calls := scriptCalls(t, e) - before
	t.Logf("%d script calls in 2s beside 50 tasks of another type", calls)
	if calls > 200 {
		t.Fatalf("%d script calls in 2s: the worker spins on work it does not serve", calls)
	}
	// Its own type still runs: behind at most 32 tasks it passes over in its
	// priority (queue's bound), or in another priority.
	e.WaitState(e.SubmitOne("mine", nil, func(s *task.Spec) { p := 1; s.Priority = &p }), task.Success, 5*time.Second)
}

// scriptCalls is how many scripts the store's Redis (every master of a
// cluster) ran so far.
func scriptCalls(t *testing.T, e *wt.Env) int {
	t.Helper()
	var mu sync.Mutex
	n := 0
	count := func(ctx context.Context, c redis.Cmdable) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, line := range strings.Split(info, "\n") {
			for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
				if rest, found := strings.CutPrefix(strings.TrimSpace(line), cmd); found {
					v, _, _ := strings.Cut(rest, ",")
					k, _ := strconv.Atoi(v)
					n += k
				}
			}
		}
		return nil
	}
	var err error
	if cc, ok := e.Store.Client().(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(e.Ctx, func(ctx context.Context, c *redis.Client) error { return count(ctx, c) })
	} else {
		err = count(e.Ctx, e.Store.Client())
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A worker that takes a wake-up meant for a type it does not serve passes
// it on: the worker that serves it starts the task long before its idle
// safety timeout (6s here).
func TestPassedOverWorkWakesTheNextWorker(t *testing.T) {
	e := wt.New(t)
	other := e.Worker(worker.Options{ID: "other", Concurrency: 1, IdleWait: 6 * time.Second})
	other.Handle("noop", ok)
	e.Run(other)
	// Redis wakes the client that blocked first: let "other" block first.
	time.Sleep(500 * time.Millisecond)
	started := make(chan time.Time, 1)
	mine := e.Worker(worker.Options{ID: "mine", Concurrency: 1, IdleWait: 6 * time.Second})
	mine.Handle("custom", func(context.Context, *worker.Task) error { started <- time.Now(); return nil })
	e.Run(mine)
	time.Sleep(500 * time.Millisecond)
	sent := time.Now()
	e.SubmitOne("custom", nil)
	at := recv(t, started, 3*time.Second, "the serving worker starts the task")
	t.Logf("started %v after the submit", at.Sub(sent))
}

// A worker of 6 slots with 2 of its own for type hang: every hang handler
// blocks, yet the 30 noop tasks submitted after 10 hang tasks all run (the
// shared 4 slots), never more than 2 hang handlers run at once, and once
// unblocked every hang task succeeds at its first attempt. Bad per-type
// concurrency is refused by New.
func TestTypeConcurrencyIsolatesABlockedType(t *testing.T) {
	e := wt.New(t)
	w := e.Worker(worker.Options{ID: "w", Concurrency: 6, TypeConcurrency: map[string]int{"hang": 2}})
	unblock := make(chan struct{})
	var mu sync.Mutex
	running, most := 0, 0
	w.Handle("hang", func(ctx context.Context, _ *worker.Task) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-unblock:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	w.Handle("noop", ok)
	e.Run(w)
	hangs := e.Submit("hang", nil, 10)
	wt.Eventually(t, 10*time.Second, "2 hang handlers running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running == 2
	})
	noops := e.Submit("noop", nil, 30)
	for _, id := range noops {
		e.WaitState(id, task.Success, 10*time.Second)
	}
	mu.Lock()
	if most != 2 {
		t.Errorf("%d hang handlers ran at once, want its 2 slots", most)
	}
	mu.Unlock()
	close(unblock)
	for _, id := range hangs {
		if tk := e.WaitState(id, task.Success, 10*time.Second); tk.Attempts != 1 {
			t.Errorf("%s: %d attempts, want 1", id, tk.Attempts)
		}
	}
	for _, c := range []struct {
		tc   map[string]int
		want string
	}{
		{map[string]int{"hang": 6}, "leaving none of Concurrency 6"},
		{map[string]int{"hang": 0}, `TypeConcurrency["hang"] 0 must be > 0`},
		{map[string]int{"no way": 1}, "TypeConcurrency"},
	} {
		_, err := worker.New(e.Store.Claimer(), worker.Options{Pool: "cpu", Concurrency: 6, TypeConcurrency: c.tc})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TypeConcurrency %v: %v, want an error containing %q", c.tc, err, c.want)
		}
	}
}

package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

func TestConcurrentClaimsEachExactlyOnce(t *testing.T) {
	e := newEnv(t)
	const total = 10000
	batch := make([]queue.NewTask, 0, total)
	for i := 0; i < total; i++ {
		batch = append(batch, queue.NewTask{Spec: e.spec(prio(i % 5)), Pool: "cpu"})
	}
	if _, err := e.s.Submit(e.ctx, batch...); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ts, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 7})
				if err != nil {
					t.Error(err)
					return
				}
				if len(ts) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range ts {
					seen[tk.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("claimed %d distinct tasks, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("task %s claimed %d times", id, n)
		}
	}
	c, _ := e.s.Counts(e.ctx)
	if c.Running != total || c.Ready != 0 {
		t.Fatalf("counts %+v", c)
	}
}

func TestAgingBounded(t *testing.T) {
	// Priority order is a shard's: a claim takes from the shards in turn.
	e := newEnv(t, oneShard) // aging step 60s
	old4 := e.submit("cpu", prio(4))
	e.clock.Advance(3*time.Minute + time.Second)
	fresh1 := e.submit("cpu", prio(1))
	if got := e.claimOne("cpu").ID; got != old4 {
		t.Fatalf("a priority-4 task that waited > 3 min should run before a fresh priority 1; got %s", got)
	}
	// Never before a fresh priority 0, however long it waited.
	e.claimOne("cpu") // fresh1
	_ = fresh1
	old4b := e.submit("cpu", prio(4))
	e.clock.Advance(24 * time.Hour)
	fresh0 := e.submit("cpu", prio(0))
	if got := e.claimOne("cpu").ID; got != fresh0 {
		t.Fatalf("priority 0 is strict: got %s, want %s", got, fresh0)
	}
	if got := e.claimOne("cpu").ID; got != old4b {
		t.Fatalf("then the aged task: got %s", got)
	}
	// Within 3 minutes a fresh priority 1 still wins over a priority 4.
	young4 := e.submit("cpu", prio(4))
	e.clock.Advance(2 * time.Minute)
	fresh1 = e.submit("cpu", prio(1))
	if got := e.claimOne("cpu").ID; got != fresh1 {
		t.Fatalf("after 2 min the priority-4 task must not win yet: got %s (p4 %s)", got, young4)
	}
}

func TestIdempotency(t *testing.T) {
	e := newEnv(t)
	key := func(s *task.Spec) { s.IdempotencyKey = "order-42" }
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	first := res[0].ID
	res, _ = e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(key), Pool: "cpu"})
	if !res[0].Duplicate || res[0].ID != first || res[0].State != task.Ready {
		t.Fatalf("repeat: %+v", res[0])
	}
	res, _ = e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(key, prio(0)), Pool: "cpu"})
	if !errors.Is(res[0].Err, task.ErrIdempotencyConflict) || res[0].ID != first {
		t.Fatalf("other spec: %+v", res[0])
	}
	other := func(s *task.Spec) { s.IdempotencyKey = "order-42"; s.Tenant = "acme" }
	res, _ = e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(other), Pool: "cpu"})
	if res[0].Err != nil || res[0].Duplicate {
		t.Fatalf("keys are per tenant: %+v", res[0])
	}
	c, _ := e.s.Counts(e.ctx)
	if c.Ready != 2 {
		t.Fatalf("ready %d, want 2", c.Ready)
	}
	// A fixed id is accepted once (hand-off receivers rely on it).
	id := e.s.NewID(0, e.clock.Now())
	for i, want := range []error{nil, task.ErrExists} {
		res, _ := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(), Pool: "cpu", ID: id})
		if !errors.Is(res[0].Err, want) {
			t.Fatalf("fixed id submit %d: %v", i, res[0].Err)
		}
	}
}

func TestPromoteReturnsNextDueAndCancelRunning(t *testing.T) {
	e := newEnv(t)
	e.submit("cpu", delay(5*time.Second))
	e.submit("cpu", delay(9*time.Second))
	res, err := e.s.Promote(e.ctx, leader, 10)
	if err != nil || res.Moved != 0 || !res.NextDue.Equal(e.clock.Now().Add(5*time.Second)) {
		t.Fatalf("promote: %+v %v", res, err)
	}
	e.clock.Advance(5 * time.Second)
	res, _ = e.s.Promote(e.ctx, leader, 10)
	if res.Moved != 1 || res.Ready != 1 || !res.NextDue.Equal(e.clock.Now().Add(4*time.Second)) {
		t.Fatalf("promote 2: %+v", res)
	}
	tk := e.claimOne("cpu")
	st, err := e.s.Cancel(e.ctx, tk.ID, "", "op")
	if err != nil || st != task.Running {
		t.Fatalf("cancel running: %s %v", st, err)
	}
	stops, _ := e.s.Heartbeat(e.ctx, "w1", "cpu", 1, queue.Types{}, []queue.Lease{{ID: tk.ID, Token: tk.LeaseToken}})
	if len(stops) != 1 || stops[0].Why != queue.StopCanceled {
		t.Fatalf("heartbeat after cancel: %v", stops)
	}
	st, _, err = e.s.Fail(e.ctx, queue.Failure{ID: tk.ID, Token: tk.LeaseToken, Error: "context canceled", Retryable: true})
	if err != nil || st != task.Canceled {
		t.Fatalf("ack: %s %v", st, err)
	}
}

func TestReturnKeepsRetryAndEnqueueTime(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu", retries(0), prio(3))
	enq := e.clock.Now().UnixMilli()
	e.clock.Advance(time.Minute)
	tk := e.claimOne("cpu")
	st, err := e.s.Return(e.ctx, id, tk.LeaseToken, task.ReasonPreempted, 90*time.Second)
	if err != nil || st != task.Pending {
		t.Fatal(st, err)
	}
	e.clock.Advance(91 * time.Second)
	if _, err := e.s.Promote(e.ctx, leader, 10); err != nil {
		t.Fatal(err)
	}
	got, _ := e.s.Get(e.ctx, id)
	if got.State != task.Ready || got.Attempts != 0 || got.PreemptCount != 1 || got.EnqueuedAt.UnixMilli() != enq {
		t.Fatalf("after preemption: %+v", got)
	}
	// The retry budget is intact: max_retries 0 still allows a first attempt that fails into the DLQ only once.
	tk = e.claimOne("cpu")
	if tk.Attempts != 1 {
		t.Fatalf("attempts %d", tk.Attempts)
	}
}

func TestWakeUpMarker(t *testing.T) {
	e := newEnv(t)
	woke := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		ok, err := e.s.WaitForWork(e.ctx, "cpu", 5*time.Second)
		if err != nil || !ok {
			t.Error("not woken", err)
		}
		woke <- time.Since(start)
	}()
	time.Sleep(50 * time.Millisecond)
	e.submit("cpu")
	select {
	case d := <-woke:
		t.Logf("woken %v after start (submit at 50ms)", d)
	case <-time.After(3 * time.Second):
		t.Fatal("idle claimer was not woken")
	}
	// Only one marker per shard, however many submits (round-robin over
	// the shards: 6 reach every one of up to 3 shards twice).
	for i := 0; i < 6; i++ {
		e.submit("cpu")
	}
	for i := range e.s.Shards() {
		if n, _ := e.s.Client().LLen(e.ctx, e.s.Prefix(i)+"wake:cpu").Result(); n != 1 {
			t.Fatalf("%s: %d markers, want 1", e.s.Prefix(i), n)
		}
	}
}

// Lua keeps 14 significant digits in tostring; ms near 2^53 must survive.
func TestLuaNumbersNear2to53(t *testing.T) {
	const big = int64(1)<<53 - 1
	clock := &fakeClock{t: time.UnixMilli(big - 10)}
	e := newEnv(t, func(o *queue.Options) { o.Now = clock.Now })
	e.clock = clock
	sp := e.spec()
	due := time.UnixMilli(big)
	sp.RunAt = &due
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := e.s.Get(e.ctx, res[0].ID)
	if got.DueAt.UnixMilli() != big {
		t.Fatalf("due %d, want %d", got.DueAt.UnixMilli(), big)
	}
	pr, err := e.s.Promote(e.ctx, leader, 10)
	if err != nil || pr.NextDue.UnixMilli() != big {
		t.Fatalf("next due %d, want %d (%v)", pr.NextDue.UnixMilli(), big, err)
	}
	clock.Advance(10 * time.Millisecond)
	if pr, _ = e.s.Promote(e.ctx, leader, 10); pr.Ready != 1 {
		t.Fatalf("not promoted at %d", big)
	}
	score, _ := e.s.Client().ZScore(e.ctx, e.shardPrefix(res[0].ID)+"q:cpu:2", res[0].ID).Result()
	if int64(score) != big {
		t.Fatalf("ready score %d, want %d", int64(score), big)
	}
	got, _ = e.s.Get(e.ctx, res[0].ID)
	if got.EnqueuedAt.UnixMilli() != big {
		t.Fatalf("enqueue %d", got.EnqueuedAt.UnixMilli())
	}
}

// With appendfsync always, a Redis killed mid-stream keeps every task it
// acknowledged.
func TestDurabilityAcrossRedisRestart(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{AOFAlways: true})
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	s, err := newStages(rdb, queue.Options{Region: "eu-west"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var accepted []string
	var failures int
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			sp := &task.Spec{Type: "t"}
			_ = sp.Normalize(task.DefaultDefaults(), time.Now())
			res, err := s.Submit(ctx, queue.NewTask{Spec: sp, Pool: "cpu"})
			if err != nil {
				failures++
				time.Sleep(5 * time.Millisecond)
				continue
			}
			accepted = append(accepted, res[0].ID)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	r.Restart(true) // SIGKILL, then start on the same data dir
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done
	if len(accepted) < 10 || failures == 0 {
		t.Fatalf("the restart did not happen mid-stream: %d accepted, %d failed", len(accepted), failures)
	}
	for _, id := range accepted {
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("accepted task %s lost after restart: %v", id, err)
		}
	}
	c, _ := s.Counts(ctx)
	if c.Ready < len(accepted) {
		t.Fatalf("ready %d < accepted %d", c.Ready, len(accepted))
	}
	t.Logf("%d accepted, %d refused while Redis was down, all present", len(accepted), failures)
}

func TestWaitForWorkSubSecond(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	ok, err := e.s.WaitForWork(e.ctx, "cpu", 200*time.Millisecond)
	if err != nil || ok {
		t.Fatalf("woken without work: %v %v", ok, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 900*time.Millisecond {
		t.Fatalf("a 200 ms wait took %v", d)
	}
}

func TestResultKeepsNewlines(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu")
	tk := e.claimOne("cpu")
	if errs, _ := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: tk.LeaseToken, Result: "line 1\nline 2"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got, _ := e.s.Get(e.ctx, id)
	if got.Result != "line 1\nline 2" {
		t.Fatalf("result %q", got.Result)
	}
}

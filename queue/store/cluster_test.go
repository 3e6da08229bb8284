package store_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/claim"
	"github.com/ax-sched/ax/task"
	"go.uber.org/goleak"
)

// newClusterEnv is newEnv on a real 3-master Redis Cluster with 3 shards,
// whatever testenv.ModeEnv says: the shared cluster in cluster mode, else
// one of the test's own.
func newClusterEnv(t *testing.T) *env {
	t.Helper()
	var e *env
	if testenv.ClusterMode() {
		e = newEnv(t)
	} else {
		// Forming a cluster of its own is a multi-process test: make
		// check (-short) leaves it to make test.
		testenv.Slow(t)
		c := testenv.StartRedisCluster(t, testenv.SuiteMasters)
		clock := newFakeClock()
		e = &env{t: t, clock: clock, rdb: c.Client(t), flush: c.Flush}
		s, err := newStages(e.rdb, queue.Options{Region: "eu-west", Now: clock.Now, Shards: testenv.SuiteMasters})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		e.ctx, e.s = ctx, s
	}
	s, ctx := e.s, e.ctx
	// The cluster client opens a client (with goroutines of its own) per
	// node on first use: open them all now, before a test takes its
	// goroutine baseline.
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// Which masters serve the shards depends on the hash tags' slots (with
	// region eu-west: two of them share one).
	masters := map[string]bool{}
	for shard := range s.Shards() {
		n, err := s.Cluster().MasterForKey(ctx, s.Prefix(shard))
		if err != nil {
			t.Fatal(err)
		}
		masters[n.Options().Addr] = true
	}
	t.Logf("%d shards on %d masters", s.Shards(), len(masters))
	return e
}

// submitOn accepts one task into pool on shard and returns its id.
func (e *env) submitOn(shard int, pool string) string {
	e.t.Helper()
	id := e.s.NewID(shard, e.clock.Now())
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(), Pool: pool, Pinned: true, ID: id})
	if err != nil || res[0].Err != nil {
		e.t.Fatalf("submit: %v %v", err, res)
	}
	return id
}

// waitAsync runs w.Wait in a goroutine; the channel gets its answer.
func waitAsync(ctx context.Context, w *claim.Waker, timeout time.Duration) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ok, err := w.Wait(ctx, timeout)
		if err == nil && !ok {
			err = fmt.Errorf("not woken within %v", timeout)
		}
		ch <- err
	}()
	return ch
}

func TestClusterWakerWakesOnEveryShard(t *testing.T) {
	e := newClusterEnv(t)
	ignore := goleak.IgnoreCurrent()
	w := e.s.NewWaker("cpu")
	for shard := range e.s.Shards() {
		start := time.Now()
		woke := waitAsync(e.ctx, w, 5*time.Second)
		time.Sleep(20 * time.Millisecond) // the waiter is listening
		e.submitOn(shard, "cpu")
		if err := <-woke; err != nil {
			t.Fatalf("shard %d: %v", shard, err)
		}
		t.Logf("shard %d: woken %v after the wait began (submit at 20ms)", shard, time.Since(start))
		e.claimOne("cpu")
	}
	// Nothing to hear: a plain timeout, not an error (CROSSSLOT before).
	if ok, err := w.Wait(e.ctx, 300*time.Millisecond); ok || err != nil {
		t.Fatalf("an idle wait: woken %v, %v", ok, err)
	}
	w.Close()
	w.Close()
	if ok, err := w.Wait(e.ctx, time.Second); ok || err == nil {
		t.Fatalf("a wait after Close: %v %v, want an error", ok, err)
	}
	goleak.VerifyNone(t, ignore)
}

// A marker a Waker's pop takes while its claimer is busy elsewhere goes to
// another idle claimer, or stays in Redis for the next one.
func TestClusterWakerLeavesMarkersForOthers(t *testing.T) {
	e := newClusterEnv(t)
	ignore := goleak.IgnoreCurrent()
	busy, idle := e.s.NewWaker("cpu"), e.s.NewWaker("cpu")
	// busy hears shard 0 and goes to work: its pops on shards 1 and 2 are
	// still blocked in Redis, ahead of idle's.
	woke := waitAsync(e.ctx, busy, 5*time.Second)
	time.Sleep(20 * time.Millisecond)
	e.submitOn(0, "cpu")
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	woke = waitAsync(e.ctx, idle, 5*time.Second)
	time.Sleep(20 * time.Millisecond)
	e.submitOn(1, "cpu")
	if err := <-woke; err != nil {
		t.Fatalf("the idle claimer: %v (the busy one's pop kept the marker)", err)
	}
	// No one waits now: a marker stays for the next claimer once every
	// pop still running has ended (each blocks wakerBlock at most).
	e.submitOn(2, "cpu")
	key := e.s.Prefix(2) + "wake:cpu"
	time.Sleep(claim.WakerBlock + 500*time.Millisecond)
	if n, err := e.rdb.LLen(e.ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("shard 2's markers with no one waiting: %d, %v; want 1", n, err)
	}
	if ok, err := idle.Wait(e.ctx, 5*time.Second); !ok || err != nil {
		t.Fatalf("the next wait: woken %v, %v; want the kept marker", ok, err)
	}
	busy.Close()
	idle.Close()
	goleak.VerifyNone(t, ignore)
}

// A wait takes one marker, as one BLPOP would: work arriving on two shards
// at once wakes two idle claimers, not one twice.
func TestClusterWakerTakesOneMarkerAWait(t *testing.T) {
	e := newClusterEnv(t)
	ignore := goleak.IgnoreCurrent()
	a, b := e.s.NewWaker("cpu"), e.s.NewWaker("cpu")
	for round := range 5 {
		woke := waitAsync(e.ctx, a, 5*time.Second)
		time.Sleep(20 * time.Millisecond)
		// One call, two shards: both markers appear within one round trip.
		res, err := e.s.Submit(e.ctx,
			queue.NewTask{Spec: e.spec(), Pool: "cpu", Pinned: true, ID: e.s.NewID(1, e.clock.Now())},
			queue.NewTask{Spec: e.spec(), Pool: "cpu", Pinned: true, ID: e.s.NewID(2, e.clock.Now())})
		if err != nil || res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("submit: %v %v", err, res)
		}
		if err := <-woke; err != nil {
			t.Fatalf("round %d: the first claimer: %v", round, err)
		}
		if ok, err := b.Wait(e.ctx, 5*time.Second); !ok || err != nil {
			t.Fatalf("round %d: the second claimer: woken %v, %v (the first one took both markers)", round, ok, err)
		}
		e.claim("cpu", 2)
	}
	a.Close()
	b.Close()
	goleak.VerifyNone(t, ignore)
}

// A wait that ctx ends returns at once, and Close ends pops blocked in
// Redis without waiting out their timeout.
func TestClusterWakerCancelAndClose(t *testing.T) {
	e := newClusterEnv(t)
	ignore := goleak.IgnoreCurrent()
	w := e.s.NewWaker("cpu")
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan bool)
	go func() { ok, _ := w.Wait(ctx, time.Minute); done <- ok }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("woken without work")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after ctx ended")
	}
	w.Close()
	goleak.VerifyNone(t, ignore)
	// WaitForWork on a cluster: a Waker per call.
	if ok, err := e.s.WaitForWork(e.ctx, "cpu", 200*time.Millisecond); ok || err != nil {
		t.Fatalf("WaitForWork without work: %v %v", ok, err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		e.submitOn(2, "cpu")
	}()
	if ok, err := e.s.WaitForWork(e.ctx, "cpu", 5*time.Second); !ok || err != nil {
		t.Fatalf("WaitForWork with work: %v %v", ok, err)
	}
	goleak.VerifyNone(t, ignore)
}

func TestClusterEvents(t *testing.T) {
	e := newClusterEnv(t)
	var ids []string
	for shard := range e.s.Shards() {
		ids = append(ids, e.submitOn(shard, "cpu"))
	}
	evs, next, err := e.s.Events(e.ctx, []string{"0", "0", "0"}, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Tasks...)
	}
	sort.Strings(got)
	sort.Strings(ids)
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("events of %v, want %v", got, ids)
	}
	// From now ("$" or nothing given): blocks until shard 2 writes,
	// returns that and continues every shard's stream from there.
	start := time.Now()
	type answer struct {
		evs  []task.Event
		next []string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		evs, next, err := e.s.Events(e.ctx, nil, 100, 10*time.Second)
		ch <- answer{evs, next, err}
	}()
	time.Sleep(100 * time.Millisecond)
	id := e.submitOn(2, "cpu")
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.evs) != 1 || a.evs[0].Shard != 2 || len(a.evs[0].Tasks) != 1 || a.evs[0].Tasks[0] != id {
		t.Fatalf("blocking read: %+v, want shard 2's submit of %s", a.evs, id)
	}
	t.Logf("blocking read answered %v after it began (submit at 100ms)", time.Since(start))
	if a.next[0] != next[0] || a.next[1] != next[1] || a.next[2] == next[2] {
		t.Fatalf("next %v after %v: shards 0 and 1 unchanged, 2 moved", a.next, next)
	}
	// Nothing new: an empty answer after block, with the same cursors.
	evs, again, err := e.s.Events(e.ctx, a.next, 100, 200*time.Millisecond)
	if err != nil || len(evs) != 0 || fmt.Sprint(again) != fmt.Sprint(a.next) {
		t.Fatalf("idle read: %v %v %v", evs, again, err)
	}
}

// Counts, dead letters and the operator scans read every shard's master.
func TestClusterCountsAndListings(t *testing.T) {
	e := newClusterEnv(t)
	if err := e.s.Ping(e.ctx); err != nil {
		t.Fatal(err)
	}
	for shard := range e.s.Shards() {
		for range 2 {
			e.submitOn(shard, "cpu")
		}
		id := e.submitOn(shard, "gpu")
		tk := e.claimOne("gpu")
		if tk.ID != id {
			t.Fatalf("claimed %s, want %s", tk.ID, id)
		}
		if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := e.s.Counts(e.ctx)
	if err != nil || c.Ready != 6 || c.ReadyIn("cpu") != 6 || c.Dead != 3 || c.Failed != 3 {
		t.Fatalf("counts %+v %v; want 6 ready in cpu, 3 dead", c, err)
	}
	dead, err := e.s.DeadLetters(e.ctx, 0, 10)
	if err != nil || len(dead) != 3 {
		t.Fatalf("dead letters %d, %v; want 3", len(dead), err)
	}
	n := 0
	if err := e.s.Waiting(e.ctx, queue.Filter{Pool: "cpu"}, func(ts []*task.Task) error { n += len(ts); return nil }); err != nil || n != 6 {
		t.Fatalf("waiting in cpu: %d, %v; want 6", n, err)
	}
	canceled, err := e.s.CancelWhere(e.ctx, queue.Filter{State: task.Ready}, "op")
	if err != nil || canceled != 6 {
		t.Fatalf("bulk cancel: %d, %v; want 6", canceled, err)
	}
	if c, _ := e.s.Counts(e.ctx); c.Ready != 0 || c.Canceled != 6 {
		t.Fatalf("after the bulk cancel: %+v", c)
	}
}

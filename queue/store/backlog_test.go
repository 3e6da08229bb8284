package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

func tenant(name string) func(*task.Spec) { return func(s *task.Spec) { s.Tenant = name } }

func (e *env) backlog(tn string) int {
	e.t.Helper()
	n, err := e.s.Backlog(e.ctx, tn)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) backlogBytes(tn string) int64 {
	e.t.Helper()
	n, err := e.s.BacklogBytes(e.ctx, tn)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestBacklogFollowsEveryPath: every way a task is accepted adds one to its
// tenant's backlog (and its payload's bytes to the tenant's backlog bytes)
// and every way it finishes or leaves the region takes it away, so the
// count is the tenant's unfinished tasks whichever path they took (a
// missed decrement would lock a tenant out for good).
func TestBacklogFollowsEveryPath(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.ColdHorizon = 5 * time.Minute })
	want := 0
	step := func(what string, d int) {
		t.Helper()
		want += d
		if got := e.backlog("acme"); got != want {
			t.Fatalf("%s: backlog %d, want %d", what, got, want)
		}
		// Every spec of this test holds the payload {"n":1}: 7 bytes.
		if got := e.backlogBytes("acme"); got != int64(7*want) {
			t.Fatalf("%s: backlog bytes %d, want %d", what, got, 7*want)
		}
	}
	// Pinned ready, unplaced, delayed, cold: all count.
	done := e.submit("cpu", tenant("acme"))
	step("submit ready", 1)
	canceled := e.submit("", tenant("acme"))
	step("submit unplaced", 1)
	cold := e.submit("", tenant("acme"), delay(time.Hour))
	step("submit cold", 1)
	e.submit("", tenant("other"))
	step("another tenant's", 0)
	if got, b := e.backlog("other"), e.backlogBytes("other"); got != 1 || b != 7 {
		t.Fatalf("other's backlog %d (%d bytes), want 1 (7 bytes)", got, b)
	}

	tk := e.claimOne("cpu")
	if _, err := e.s.Complete(e.ctx, queue.Completion{ID: done, Token: tk.LeaseToken}); err != nil {
		t.Fatal(err)
	}
	step("complete", -1)
	if _, err := e.s.Cancel(e.ctx, canceled, "CANCELED_BY_USER", "test"); err != nil {
		t.Fatal(err)
	}
	step("cancel pending", -1)
	if _, err := e.s.Cancel(e.ctx, cold, "CANCELED_BY_USER", "test"); err != nil {
		t.Fatal(err)
	}
	step("cancel cold", -1)

	dead := e.submit("cpu", tenant("acme"), retries(0))
	step("submit", 1)
	tk = e.claimOne("cpu")
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: dead, Token: tk.LeaseToken, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	step("fail, no retries left", -1)
	if err := e.s.Replay(e.ctx, dead, "test"); err != nil {
		t.Fatal(err)
	}
	step("replay", 1)
	if _, err := e.s.Cancel(e.ctx, dead, "CANCELED_BY_USER", "test"); err != nil {
		t.Fatal(err)
	}
	step("cancel replayed", -1)

	retried := e.submit("cpu", tenant("acme"), retries(1))
	step("submit", 1)
	tk = e.claimOne("cpu")
	if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: retried, Token: tk.LeaseToken, Error: "boom", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	step("fail with a retry left", 0)
	e.clock.Advance(time.Minute)
	if _, err := e.s.Promote(e.ctx, leader, 100); err != nil {
		t.Fatal(err)
	}
	e.claimOne("cpu")
	e.clock.Advance(time.Minute) // the lease expires: the last retry is spent
	if n, _, err := e.s.Reap(e.ctx, leader, 100); err != nil || n != 1 {
		t.Fatalf("reap: %d %v", n, err)
	}
	if st := e.state(retried); st != task.Failed {
		t.Fatalf("reaped task %s, want FAILED", st)
	}
	step("reap, no retries left", -1)

	running := e.submit("cpu", tenant("acme"))
	step("submit", 1)
	tk = e.claimOne("cpu")
	if _, err := e.s.Cancel(e.ctx, running, "CANCELED_BY_USER", "test"); err != nil {
		t.Fatal(err)
	}
	step("cancel requested (still running)", 0)
	if _, err := e.s.Return(e.ctx, running, tk.LeaseToken, "WORKER_SHUTDOWN", 0); err != nil {
		t.Fatal(err)
	}
	step("the worker acks the cancel", -1)

	// Handed off at submit: counted here while in the outbox; gone once
	// the other region accepted it; a refusal keeps it here.
	sp := e.spec(tenant("acme"))
	res, err := e.s.Submit(e.ctx, queue.NewTask{Spec: sp, Pool: "gpu", HandOff: "us-east"},
		queue.NewTask{Spec: e.spec(tenant("acme")), Pool: "gpu", HandOff: "us-east"})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("submit for hand-off: %v %+v", err, res)
	}
	step("submit for hand-off", 2)
	if err := e.s.HandOffDone(e.ctx, res[0].ID, true); err != nil {
		t.Fatal(err)
	}
	step("hand-off accepted", -1)
	if err := e.s.HandOffDone(e.ctx, res[1].ID, false); err != nil {
		t.Fatal(err)
	}
	step("hand-off refused", 0)

	// Received from another region, with its history: counted here.
	recv, err := e.s.Submit(e.ctx, queue.NewTask{ID: e.s.NewID(0, e.clock.Now()), Spec: e.spec(tenant("acme")), Pool: "cpu",
		History: &queue.History{CreatedAt: e.clock.Now(), Attempts: 1}})
	if err != nil || recv[0].Err != nil {
		t.Fatalf("receive: %v %+v", err, recv)
	}
	step("hand-off received", 1)
}

// TestBacklogCapRefusesAndStoresNothing: past its cap a tenant's submit is
// ErrBacklogFull and leaves no trace; a finished task makes room; other
// tenants and uncapped submits (DAG releases, schedules) are not refused.
func TestBacklogCapRefusesAndStoresNothing(t *testing.T) {
	e := newEnv(t, oneShard)
	capped := func(pool string) queue.NewTask {
		return queue.NewTask{Spec: e.spec(tenant("acme")), Pool: pool, Pinned: pool != "", BacklogMax: 2}
	}
	res, err := e.s.Submit(e.ctx, capped("cpu"), capped(""), capped("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, queue.ErrBacklogFull) {
		t.Fatalf("results %+v, want two created and ErrBacklogFull", res)
	}
	if _, err := e.s.Get(e.ctx, res[2].ID); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("refused task: %v, want not found", err)
	}
	c, err := e.s.Counts(e.ctx)
	if err != nil || c.Pending+c.Ready != 2 {
		t.Fatalf("counts %+v %v, want 2 tasks", c, err)
	}
	if got := e.backlog("acme"); got != 2 {
		t.Fatalf("backlog %d after a refusal, want 2", got)
	}
	// The default tenant and other tenants have their own counts.
	res, err = e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(tenant("other")), BacklogMax: 2}, queue.NewTask{Spec: e.spec(), BacklogMax: 2})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("other tenants: %v %+v", err, res)
	}
	// A task without a cap (a DAG node, a schedule's slot) is counted, not refused.
	e.submit("cpu", tenant("acme"))
	if got := e.backlog("acme"); got != 3 {
		t.Fatalf("backlog %d, want 3", got)
	}
	tk := e.claimOne("cpu")
	if _, err := e.s.Complete(e.ctx, queue.Completion{ID: tk.ID, Token: tk.LeaseToken}); err != nil {
		t.Fatal(err)
	}
	res, err = e.s.Submit(e.ctx, capped("cpu"))
	if err != nil || !errors.Is(res[0].Err, queue.ErrBacklogFull) {
		t.Fatalf("at 2 of 2: %v %+v, want ErrBacklogFull", err, res)
	}
	tk = e.claimOne("cpu")
	if _, err := e.s.Complete(e.ctx, queue.Completion{ID: tk.ID, Token: tk.LeaseToken}); err != nil {
		t.Fatal(err)
	}
	res, err = e.s.Submit(e.ctx, capped("cpu"))
	if err != nil || res[0].Err != nil {
		t.Fatalf("after a task finished: %v %+v, want created", err, res)
	}
}

// TestBacklogCapHoldsUnderConcurrentServers: two stores on one Redis (two
// servers of a region) submitting at once never overshoot the cap: the
// check and the count are one script.
func TestBacklogCapHoldsUnderConcurrentServers(t *testing.T) {
	e := newEnv(t, oneShard)
	other, err := newStages(e.rdb, e.s.Options())
	if err != nil {
		t.Fatal(err)
	}
	const capN, tries = 7, 40
	var mu sync.Mutex
	created, full := 0, 0
	var wg sync.WaitGroup
	for i := range tries {
		s := e.s
		if i%2 == 1 {
			s = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Submit(e.ctx, queue.NewTask{Spec: e.spec(tenant("acme")), BacklogMax: capN},
				queue.NewTask{Spec: e.spec(tenant("acme")), BacklogMax: capN})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range res {
				switch {
				case r.Err == nil:
					created++
				case errors.Is(r.Err, queue.ErrBacklogFull):
					full++
				default:
					t.Error(r.Err)
				}
			}
		}()
	}
	wg.Wait()
	if created != capN || full != 2*tries-capN {
		t.Fatalf("created %d, refused %d; want %d and %d", created, full, capN, 2*tries-capN)
	}
	if got := e.backlog("acme"); got != capN {
		t.Fatalf("backlog %d, want %d", got, capN)
	}
}

// TestBacklogCapSplitsAcrossShards: on several shards (the masters of a
// Redis Cluster) each shard admits its share, ⌈cap ÷ shards⌉, so the
// region holds at most shards × that; unkeyed submits spread over the
// shards and reach the whole cap.
func TestBacklogCapSplitsAcrossShards(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.Shards = 3 })
	var nts []queue.NewTask
	for range 12 {
		nts = append(nts, queue.NewTask{Spec: e.spec(tenant("acme")), BacklogMax: 6})
	}
	res, err := e.s.Submit(e.ctx, nts...)
	if err != nil {
		t.Fatal(err)
	}
	perShard := map[int]int{}
	created := 0
	for _, r := range res {
		if r.Err == nil {
			created++
			sh, _ := e.s.ShardOf(r.ID)
			perShard[sh]++
		} else if !errors.Is(r.Err, queue.ErrBacklogFull) {
			t.Fatal(r.Err)
		}
	}
	if created != 6 || perShard[0] != 2 || perShard[1] != 2 || perShard[2] != 2 {
		t.Fatalf("created %d %v, want 2 in each of 3 shards", created, perShard)
	}
	if got := e.backlog("acme"); got != 6 {
		t.Fatalf("backlog %d, want 6", got)
	}
}

// TestDAGReservationsAndSubmitsShareTheCap: DAG creations reserve room
// for all their nodes in the same script-level count the submits check,
// so any number of concurrent creations and submits, from two servers,
// never pass max_backlog together (a creation that read the count did,
// by its nodes); a node's task takes its reservation instead of counting
// again, and the room of nodes never released comes back when the run
// gives it back (once, however often that is asked). Shards: each checks
// its share, as for submits (also with AX_TEST_REDIS=cluster).
func TestDAGReservationsAndSubmitsShareTheCap(t *testing.T) {
	e := newEnv(t)
	other, err := newStages(e.rdb, e.s.Options())
	if err != nil {
		t.Fatal(err)
	}
	shards := e.s.Options().Shards
	capN := 9 * shards
	const dags, submits = 12, 4 // 4 submits never fill the cap: some DAG fits
	defs := make([]*queue.DAGDef, dags)
	for i := range defs {
		defs[i] = e.dagDef("a", "b:a", "c:a")
		defs[i].BacklogMax = capN
	}
	var mu sync.Mutex
	var made []*queue.DAGDef
	tasks := 0
	var wg sync.WaitGroup
	for i := range dags + submits {
		s := e.s
		if i%2 == 1 {
			s = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i < dags {
				err := s.CreateDAG(e.ctx, defs[i], nil)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					made = append(made, defs[i])
				case !errors.Is(err, queue.ErrBacklogFull):
					t.Error(err)
				}
				return
			}
			res, err := s.Submit(e.ctx, queue.NewTask{Spec: e.spec(tenant("acme")), BacklogMax: capN})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case res[0].Err == nil:
				tasks++
			case !errors.Is(res[0].Err, queue.ErrBacklogFull):
				t.Error(res[0].Err)
			}
		}()
	}
	wg.Wait()
	got := e.backlog("acme")
	if want := 3*len(made) + tasks; got != want || got > capN || len(made) == 0 || len(made) == dags {
		t.Fatalf("%d DAGs and %d tasks accepted, backlog %d; want 3 per DAG plus the tasks, at most %d, some DAGs refused",
			len(made), tasks, got, capN)
	}
	share := (capN + shards - 1) / shards
	for sh := range shards {
		if n, _ := e.rdb.HGet(e.ctx, e.s.Prefix(sh)+"bl", "acme").Int(); n > share {
			t.Fatalf("shard %d holds %d, its share is %d", sh, n, share)
		}
	}
	// A refused creation stored nothing.
	for _, d := range defs {
		if !slices.Contains(made, d) {
			if _, err := e.s.DAGDefinition(e.ctx, d.ID); !errors.Is(err, queue.ErrDAGNotFound) {
				t.Fatalf("refused DAG %s left its definition: %v", d.ID, err)
			}
		}
	}

	// The first run's root is released twice (as the reconciler may):
	// its reservation is taken once and the count does not move.
	d := made[0]
	for range 2 {
		if _, err := e.s.Submit(e.ctx, queue.NewTask{ID: d.Nodes[0].TaskID, Spec: e.spec(tenant("acme")), Reserved: true}); err != nil {
			t.Fatal(err)
		}
		if n := e.backlog("acme"); n != got {
			t.Fatalf("a released node: backlog %d, want %d", n, got)
		}
	}
	// The run ends with b and c never released: their room comes back,
	// once; the root's task still counts until it finishes.
	for range 2 {
		if err := e.s.UnreserveBacklog(e.ctx, d.TaskIDs()); err != nil {
			t.Fatal(err)
		}
		if n := e.backlog("acme"); n != got-2 {
			t.Fatalf("run ended: backlog %d, want %d", n, got-2)
		}
	}
	if _, err := e.s.Cancel(e.ctx, d.Nodes[0].TaskID, "CANCELED_BY_USER", "test"); err != nil {
		t.Fatal(err)
	}
	if n := e.backlog("acme"); n != got-3 {
		t.Fatalf("root canceled: backlog %d, want %d", n, got-3)
	}
}

// TestBacklogCapHoldsInTheColdTier: tasks of a tenant with a max_backlog
// go to the cold tier like any (≈ 100 B instead of ≈ 430 B each), its
// submit checks the cap with the count atomically (two stores at once:
// never over, per shard at most its share; also with
// AX_TEST_REDIS=cluster), and the count stays exact as tasks move cold →
// hot (a read thaws one, the leader promotes the rest) and end.
func TestBacklogCapHoldsInTheColdTier(t *testing.T) {
	e := newEnv(t, func(o *queue.Options) { o.ColdHorizon = 5 * time.Minute })
	other, err := newStages(e.rdb, e.s.Options())
	if err != nil {
		t.Fatal(err)
	}
	shards := e.s.Options().Shards
	capN := 3 * shards
	var mu sync.Mutex
	var created []string
	var wg sync.WaitGroup
	for i := range 30 {
		s := e.s
		if i%2 == 1 {
			s = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Submit(e.ctx, queue.NewTask{Spec: e.spec(tenant("acme"), delay(time.Hour)), BacklogMax: capN})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case res[0].Err == nil:
				created = append(created, res[0].ID)
			case !errors.Is(res[0].Err, queue.ErrBacklogFull):
				t.Error(res[0].Err)
			}
		}()
	}
	wg.Wait()
	cold, err := e.s.ColdWaiting(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) == 0 || len(created) > capN || cold != len(created) || e.backlog("acme") != len(created) {
		t.Fatalf("%d created (cap %d), %d cold, backlog %d: want all created cold and counted, at most the cap",
			len(created), capN, cold, e.backlog("acme"))
	}
	share := (capN + shards - 1) / shards
	for sh := range shards {
		if n, _ := e.rdb.HGet(e.ctx, e.s.Prefix(sh)+"bl", "acme").Int(); n > share {
			t.Fatalf("shard %d holds %d, its share is %d", sh, n, share)
		}
	}
	n := len(created)
	// Cold → hot, by a read and by promotion: the count does not move.
	if st := e.state(created[0]); st != task.Pending {
		t.Fatalf("thawed task %s, want PENDING", st)
	}
	if got := e.backlog("acme"); got != n {
		t.Fatalf("after a thaw: backlog %d, want %d", got, n)
	}
	e.clock.Advance(58 * time.Minute)
	if _, _, err := e.s.PromoteCold(e.ctx, leader, queue.MaxBatch); err != nil {
		t.Fatal(err)
	}
	if cold, _ := e.s.ColdWaiting(e.ctx); cold != 0 || e.backlog("acme") != n {
		t.Fatalf("after promotion: %d cold, backlog %d; want 0 and %d", cold, e.backlog("acme"), n)
	}
	if _, err := e.s.Cancel(e.ctx, created[1], "CANCELED_BY_USER", "test"); err != nil {
		t.Fatal(err)
	}
	if got := e.backlog("acme"); got != n-1 {
		t.Fatalf("after a cancel: backlog %d, want %d", got, n-1)
	}
}

// TestBacklogBytesCapRefusesAndStoresNothing: a tenant's submit whose
// payload would take its unfinished tasks' payloads past
// BacklogBytesMax is ErrBacklogBytesFull and leaves no trace, in the hot
// and the cold tier alike; a finished task gives its bytes back; another
// tenant is not refused; two stores submitting at once never overshoot.
func TestBacklogBytesCapRefusesAndStoresNothing(t *testing.T) {
	e := newEnv(t, oneShard, func(o *queue.Options) { o.ColdHorizon = 5 * time.Minute })
	big := func(n int, mod ...func(*task.Spec)) *task.Spec {
		return e.spec(append(mod, func(s *task.Spec) { s.Tenant = "acme"; s.Payload = []byte(`"` + strings.Repeat("x", n-2) + `"`) })...)
	}
	const capB = 10_000
	nt := func(sp *task.Spec) queue.NewTask { return queue.NewTask{Spec: sp, BacklogBytesMax: capB} }
	// 4 000 + 4 000 fit, 4 000 more do not; 1 500 still do.
	res, err := e.s.Submit(e.ctx, nt(big(4000)), nt(big(4000, delay(time.Hour))), nt(big(4000)), nt(big(1500)))
	if err != nil {
		t.Fatal(err)
	}
	res0 := res
	if res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, queue.ErrBacklogBytesFull) || res[3].Err != nil {
		t.Fatalf("results %+v, want created, created (cold), ErrBacklogBytesFull, created", res)
	}
	if _, err := e.s.Get(e.ctx, res[2].ID); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("refused task: %v, want not found", err)
	}
	if got, n := e.backlogBytes("acme"), e.backlog("acme"); got != 9500 || n != 3 {
		t.Fatalf("backlog %d tasks, %d bytes; want 3, 9500", n, got)
	}
	// The cold tier refuses alike.
	res, err = e.s.Submit(e.ctx, nt(big(600, delay(time.Hour))))
	if err != nil || !errors.Is(res[0].Err, queue.ErrBacklogBytesFull) {
		t.Fatalf("cold over the cap: %v %+v, want ErrBacklogBytesFull", err, res)
	}
	coldID := res0[1].ID
	// Another tenant has bytes of its own.
	res, err = e.s.Submit(e.ctx, queue.NewTask{Spec: e.spec(tenant("other"), func(s *task.Spec) { s.Payload = []byte(`"` + strings.Repeat("y", 8000) + `"`) }), BacklogBytesMax: capB})
	if err != nil || res[0].Err != nil {
		t.Fatalf("another tenant: %v %+v", err, res)
	}
	// Cancelling the cold one gives its 4 000 bytes back.
	if _, err := e.s.Cancel(e.ctx, coldID, "CANCELED_BY_USER", "test"); err != nil {
		t.Fatal(err)
	}
	if got := e.backlogBytes("acme"); got != 5500 {
		t.Fatalf("backlog bytes %d after a cancel, want 5500", got)
	}

	// Two stores at once: 40 submits of 1 000 bytes into the 4 500 left:
	// exactly 4 fit.
	other, err := newStages(e.rdb, e.s.Options())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	created := 0
	var wg sync.WaitGroup
	for i := range 40 {
		s := e.s
		if i%2 == 1 {
			s = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Submit(e.ctx, nt(big(1000)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case res[0].Err == nil:
				created++
			case !errors.Is(res[0].Err, queue.ErrBacklogBytesFull):
				t.Error(res[0].Err)
			}
		}()
	}
	wg.Wait()
	if created != 4 || e.backlogBytes("acme") != 9500 {
		t.Fatalf("created %d, backlog bytes %d; want 4 and 9500", created, e.backlogBytes("acme"))
	}
}

// TestMemoryNamesTheTopTenant: Memory reads the Redis's used memory
// against its maxmemory and names the tenant whose unfinished tasks hold
// the most payload bytes (the default tenant as "default"), which changes
// as tasks finish.
func TestMemoryNamesTheTopTenant(t *testing.T) {
	e := newEnv(t)
	setMax := func(c redis.Cmdable, v string) {
		if err := c.ConfigSet(e.ctx, "maxmemory", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	each := func(fn func(c redis.Cmdable)) {
		if cc, ok := e.rdb.(*redis.ClusterClient); ok {
			if err := cc.ForEachMaster(e.ctx, func(_ context.Context, c *redis.Client) error { fn(c); return nil }); err != nil {
				t.Fatal(err)
			}
			return
		}
		fn(e.rdb)
	}
	each(func(c redis.Cmdable) {
		was, err := c.ConfigGet(e.ctx, "maxmemory").Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { setMax(c, was["maxmemory"]) })
		setMax(c, "1gb")
	})
	payload := func(n int) func(*task.Spec) {
		return func(s *task.Spec) { s.Payload = []byte(`"` + strings.Repeat("p", n) + `"`) }
	}
	e.submit("", tenant("small"), payload(100))
	e.submit("", tenant("small"), payload(100))
	bigID := e.submit("", tenant("big"), payload(1000))
	e.submit("", payload(500))
	m, err := e.s.Memory(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Max != 1<<30 || m.Used <= 0 || m.Used >= m.Max || m.Top != "big" || m.TopBytes != 1002 {
		t.Fatalf("memory %+v, want max 1 GiB, some used, top big with 1002 bytes", m)
	}
	if _, err := e.s.Cancel(e.ctx, bigID, "CANCELED_BY_USER", "test"); err != nil {
		t.Fatal(err)
	}
	if m, err = e.s.Memory(e.ctx); err != nil || m.Top != "default" || m.TopBytes != 502 {
		t.Fatalf("after big's cancel: %+v %v, want top default with 502 bytes", m, err)
	}
}

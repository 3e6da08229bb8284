package store_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
)

var modelSeed = flag.Uint64("model.seed", 0, "seed for TestModel (0: random)")

var modelSteps = flag.Int("model.steps", 3000, "operations in TestModel")

// mtask is the model's view of one task.
type mtask struct {
	id         string
	state      task.State
	pool       string // READY/RUNNING pool, or pinned pool
	pinned     bool
	prio       int
	due        time.Time // PENDING in the delayed set
	inDue      bool      // PENDING and waiting for placement
	lazy       bool      // pinned with a delay: in its pool's delayed set, then READY with the record untouched until claimed
	attempts   int
	maxRetries int
	token      string
	worker     string
	expiry     time.Time
	cancelReq  bool
	keepPool   bool // returned with a delay: goes back to its pool
	typ        string
	tenant     string
}

type model struct {
	tasks map[string]*mtask
	order []string
}

var pools = []string{"cpu", "gpu"}

var modelTypes = []string{"t.a", "t.b"}

var modelTenants = []string{"a", "b", "default"}

const fairPool = "gpu"

// TestModel runs thousands of random operations against Redis and an
// in-memory model, checking after every step that each task sits in exactly
// the structures its state implies and that counts match.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -model.seed=%d)", seed, seed)
	defer func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d", seed)
		}
	}()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	e := newEnv(t, oneShard) // the model is one shard's keys
	// Pool gpu has a fair share: its tenant sets must hold exactly its
	// READY tasks of priorities 1-4 (check), whatever way they left.
	e.setFair(map[string]queue.FairShare{fairPool: {Tenants: map[string]queue.TenantShare{"a": {Weight: 3}, "b": {Weight: 1}}}})
	m := &model{tasks: map[string]*mtask{}}
	workers := []string{"w1", "w2", "w3"}

	pick := func(filter func(*mtask) bool) *mtask {
		var c []*mtask
		for _, id := range m.order {
			if tk := m.tasks[id]; filter(tk) {
				c = append(c, tk)
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[rng.IntN(len(c))]
	}
	running := func(tk *mtask) bool { return tk.state == task.Running }

	// make check (-short): a tenth of the walk. make test (-race): a third,
	// since the walk is one goroutine and the detector made it 74 s of the
	// package's 141; each run draws a new seed, so runs add up.
	steps := *modelSteps
	switch {
	case testing.Short():
		steps = min(steps, 300)
	case raceEnabled:
		steps = min(steps, 1000)
	}
	for step := 0; step < steps; step++ {
		now := e.clock.Now()
		var what string
		switch r := rng.IntN(100); {
		case r < 20: // submit
			p := rng.IntN(5)
			n := rng.IntN(3)
			var mods = []func(*task.Spec){prio(p), retries(n)}
			d := time.Duration(0)
			if rng.IntN(3) == 0 {
				d = time.Duration(1+rng.IntN(20)) * time.Second
				mods = append(mods, delay(d))
			}
			pool := ""
			if rng.IntN(2) == 0 {
				pool = pools[rng.IntN(2)]
			}
			ty := modelTypes[rng.IntN(len(modelTypes))]
			tn := modelTenants[rng.IntN(len(modelTenants))]
			mods = append(mods, typ(ty), tenantOf(tn))
			id := e.submit(pool, mods...)
			tk := &mtask{id: id, prio: p, maxRetries: n, pool: pool, pinned: pool != "", lazy: pool != "" && d > 0, typ: ty, tenant: tn}
			switch {
			case d > 0:
				tk.state, tk.due = task.Pending, now.Add(d).Truncate(time.Millisecond)
			case pool != "":
				tk.state = task.Ready
			default:
				tk.state, tk.inDue = task.Pending, true
			}
			m.tasks[id] = tk
			m.order = append(m.order, id)
			what = "submit " + id
		case r < 28:
			d := time.Duration(rng.IntN(12000)) * time.Millisecond
			e.clock.Advance(d)
			what = fmt.Sprintf("advance %v", d)
		case r < 35: // promote
			if _, err := e.s.Promote(e.ctx, leader, 1000); err != nil {
				t.Fatal(err)
			}
			for _, tk := range m.tasks {
				if tk.state == task.Pending && !tk.inDue && !tk.due.After(now) {
					if (tk.pinned || tk.keepPool) && tk.pool != "" {
						tk.state, tk.keepPool = task.Ready, false
					} else {
						tk.inDue = true
					}
				}
			}
			what = "promote"
		case r < 42: // place
			due, err := e.s.DueTasks(e.ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			var as []queue.Assignment
			for _, d := range due {
				tk := m.tasks[d.ID]
				if tk == nil || tk.state != task.Pending || !tk.inDue {
					t.Fatalf("step %d: due set holds %s, model %+v", step, d.ID, tk)
				}
				if rng.IntN(4) == 0 {
					retry := now.Add(5 * time.Second)
					as = append(as, queue.Assignment{ID: d.ID, RetryAt: retry})
					tk.inDue, tk.due = false, retry.Truncate(time.Millisecond)
				} else {
					p := pools[rng.IntN(2)]
					as = append(as, queue.Assignment{ID: d.ID, Pool: p})
					tk.inDue, tk.state, tk.pool = false, task.Ready, p
				}
			}
			if _, err := e.s.Place(e.ctx, leader, as); err != nil {
				t.Fatal(err)
			}
			what = fmt.Sprintf("place %d", len(as))
		case r < 57: // claim
			pool := pools[rng.IntN(2)]
			w := workers[rng.IntN(3)]
			n := 1 + rng.IntN(4)
			// Claimers serve every type, one of them, or none.
			served := []queue.Types{{}, queue.AnyType, serve(t, modelTypes[0]), serve(t, modelTypes[1]), serve(t)}[rng.IntN(5)]
			var ready, other int
			for _, tk := range m.tasks {
				if tk.state == task.Ready && tk.pool == pool {
					if served.Serves(tk.typ) {
						ready++
					} else {
						other++
					}
				}
			}
			got, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: pool, Worker: w, N: n, Types: served})
			if err != nil {
				t.Fatal(err)
			}
			// Behind more than claimSkip tasks of other types a claim may see fewer.
			if len(got) != min(n, ready) && (other < queue.ClaimSkip || len(got) > min(n, ready)) {
				t.Fatalf("step %d: claim %d from %s serving %v with %d ready (%d of other types): got %d",
					step, n, pool, served, ready, other, len(got))
			}
			for _, g := range got {
				tk := m.tasks[g.ID]
				if tk == nil || tk.state != task.Ready || tk.pool != pool || !served.Serves(tk.typ) {
					t.Fatalf("step %d: claimed %s (serving %v) which the model has as %+v", step, g.ID, served, tk)
				}
				tk.state, tk.token, tk.worker, tk.lazy = task.Running, g.LeaseToken, w, false
				tk.attempts++
				tk.expiry = now.Add(10 * time.Second)
			}
			what = fmt.Sprintf("claim %s %d→%d", pool, n, len(got))
		case r < 63: // heartbeat of one worker
			w := workers[rng.IntN(3)]
			var held []queue.Lease
			want := map[string]queue.StopReason{}
			for _, id := range m.order {
				tk := m.tasks[id]
				if tk.worker == w && tk.token != "" {
					held = append(held, queue.Lease{ID: id, Token: tk.token})
					switch {
					case tk.state != task.Running:
						want[id] = queue.StopLost
					case tk.cancelReq:
						want[id] = queue.StopCanceled
					default:
						tk.expiry = now.Add(10 * time.Second)
					}
				}
			}
			stops, err := e.s.Heartbeat(e.ctx, w, "cpu", 4, queue.Types{}, held)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]queue.StopReason{}
			for _, s := range stops {
				got[s.ID] = s.Why
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d: heartbeat stops %v, want %v", step, got, want)
			}
			// A worker forgets what it was told to stop, except cancels it acks below.
			for id, why := range got {
				if why == queue.StopLost {
					m.tasks[id].token, m.tasks[id].worker = "", ""
				}
			}
			what = "heartbeat " + w
		case r < 73: // complete (sometimes with a stale token)
			tk := pick(func(x *mtask) bool { return x.token != "" })
			if tk == nil {
				continue
			}
			errs, err := e.s.Complete(e.ctx, queue.Completion{ID: tk.id, Token: tk.token})
			if err != nil {
				t.Fatal(err)
			}
			if tk.state == task.Running {
				if errs[0] != nil {
					t.Fatalf("step %d: complete %s: %v", step, tk.id, errs[0])
				}
				tk.state = task.Success
			} else if !errors.Is(errs[0], queue.ErrLeaseLost) {
				t.Fatalf("step %d: stale complete of %s: %v", step, tk.id, errs[0])
			}
			tk.token, tk.worker = "", ""
			what = "complete " + tk.id
		case r < 80: // fail
			tk := pick(running)
			if tk == nil {
				continue
			}
			retryable := rng.IntN(5) != 0
			st, due, err := e.s.Fail(e.ctx, queue.Failure{ID: tk.id, Token: tk.token, Error: "e", Retryable: retryable})
			if err != nil {
				t.Fatal(err)
			}
			want := task.Failed
			switch {
			case tk.cancelReq:
				want = task.Canceled
			case retryable && tk.attempts <= tk.maxRetries:
				want = task.Pending
				tk.due = due
			}
			if st != want {
				t.Fatalf("step %d: fail %s → %s, want %s", step, tk.id, st, want)
			}
			tk.state, tk.token, tk.worker, tk.pool = want, "", "", pinnedPool(tk)
			what = "fail " + tk.id
		case r < 84: // return (shutdown or preempt with delay)
			tk := pick(running)
			if tk == nil {
				continue
			}
			d := time.Duration(0)
			if rng.IntN(2) == 0 {
				d = time.Minute
			}
			st, err := e.s.Return(e.ctx, tk.id, tk.token, task.ReasonWorkerShutdown, d)
			if err != nil {
				t.Fatal(err)
			}
			tk.attempts--
			want := task.Ready
			switch {
			case tk.cancelReq:
				want = task.Canceled
			case d > 0:
				want, tk.due, tk.keepPool = task.Pending, now.Add(d), true
			}
			if st != want {
				t.Fatalf("step %d: return → %s, want %s", step, st, want)
			}
			tk.state, tk.token, tk.worker = want, "", ""
			what = "return " + tk.id
		case r < 88: // reap
			if _, _, err := e.s.Reap(e.ctx, leader, 1000); err != nil {
				t.Fatal(err)
			}
			for _, id := range m.order {
				tk := m.tasks[id]
				if tk.state != task.Running || tk.expiry.After(now) {
					continue
				}
				switch {
				case tk.cancelReq:
					tk.state = task.Canceled
				case tk.attempts <= tk.maxRetries:
					got, _ := e.s.Get(e.ctx, id)
					tk.state, tk.due = task.Pending, *got.DueAt
				default:
					tk.state = task.Failed
				}
				tk.pool = pinnedPool(tk)
			}
			what = "reap"
		case r < 93: // cancel
			tk := pick(func(*mtask) bool { return true })
			if tk == nil {
				continue
			}
			st, err := e.s.Cancel(e.ctx, tk.id, "", "t")
			switch tk.state {
			case task.Pending, task.Ready:
				if err != nil || st != task.Canceled {
					t.Fatalf("step %d: cancel %s: %s %v", step, tk.state, st, err)
				}
				tk.state, tk.inDue = task.Canceled, false
			case task.Running:
				if err != nil || st != task.Running {
					t.Fatalf("step %d: cancel running: %s %v", step, st, err)
				}
				tk.cancelReq = true
			default:
				var te *task.TransitionError
				if !errors.As(err, &te) {
					t.Fatalf("step %d: cancel %s: %v", step, tk.state, err)
				}
			}
			what = "cancel " + tk.id
		case r < 96: // replay
			tk := pick(func(x *mtask) bool { return x.state == task.Failed })
			if tk == nil {
				continue
			}
			if err := e.s.Replay(e.ctx, tk.id, "t"); err != nil {
				t.Fatal(err)
			}
			tk.state, tk.due, tk.attempts, tk.cancelReq = task.Pending, now.Truncate(time.Millisecond), 0, false
			what = "replay " + tk.id
		default: // priority
			tk := pick(func(x *mtask) bool { return !x.state.Terminal() })
			if tk == nil {
				continue
			}
			p := rng.IntN(5)
			if err := e.s.SetPriority(e.ctx, tk.id, p, "t"); err != nil {
				t.Fatal(err)
			}
			tk.prio = p
			what = "priority " + tk.id
		}
		m.check(t, e, step, what)
	}
	t.Logf("%d tasks, %d steps", len(m.tasks), steps)
}

func pinnedPool(tk *mtask) string {
	if tk.pinned {
		return tk.pool
	}
	return ""
}

// check compares every task and structure with the model.
func (m *model) check(t *testing.T, e *env, step int, what string) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d (%s): %s", step, what, fmt.Sprintf(format, args...))
	}
	p := e.s.Prefix(0)
	members := func(key string) map[string]bool {
		ids, err := e.s.Client().ZRange(e.ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		s := map[string]bool{}
		for _, id := range ids {
			s[id] = true
		}
		return s
	}
	delayed, due, running, dead := members(p+"delayed"), members(p+"due"), members(p+"running"), members(p+"dead")
	for id := range delayed {
		if strings.HasPrefix(id, "~") { // markers of the delayed sets below
			delete(delayed, id)
		}
	}
	// Unplaced tasks submitted with a delay wait in dn: delayed as well.
	for id := range members(p + "dn") {
		if delayed[id] {
			fail("task %s is in both delayed and dn", id)
		}
		delayed[id] = true
	}
	dsets := map[string]map[string]bool{}
	for _, pool := range pools {
		for pr := 0; pr <= task.MaxPriority; pr++ {
			dsets[fmt.Sprintf("%s:%d", pool, pr)] = members(fmt.Sprintf("%sd:%s:%d", p, pool, pr))
		}
	}
	ready := map[string]map[string]bool{}
	for _, pool := range pools {
		for pr := 0; pr <= task.MaxPriority; pr++ {
			ready[fmt.Sprintf("%s:%d", pool, pr)] = members(fmt.Sprintf("%sq:%s:%d", p, pool, pr))
		}
	}
	// The fair pool's tenant sets: exactly its READY tasks of priorities 1-4,
	// each in its tenant's set of its priority, and marked exact.
	fq := map[string]string{}
	for _, tn := range modelTenants {
		for pr := 1; pr <= task.MaxPriority; pr++ {
			for id := range members(fmt.Sprintf("%sfq:%s:%d:%s", p, fairPool, pr, tn)) {
				fq[id] = fmt.Sprintf("%d:%s", pr, tn)
			}
		}
	}
	for id, where := range fq {
		tk := m.tasks[id]
		if tk == nil || tk.state != task.Ready || tk.pool != fairPool || fmt.Sprintf("%d:%s", tk.prio, tk.tenant) != where {
			fail("task %s (%+v) is in tenant set %s of pool %s", id, tk, where, fairPool)
		}
	}
	for _, id := range m.order {
		if tk := m.tasks[id]; tk.state == task.Ready && tk.pool == fairPool && tk.prio > 0 && fq[id] == "" {
			fail("READY task %s (prio %d, tenant %s) of pool %s is in no tenant set", id, tk.prio, tk.tenant, fairPool)
		}
	}
	if v, _ := e.s.Client().HGet(e.ctx, p+"fr:"+fairPool, "!").Result(); v != "1" {
		fail("pool %s's tenant sets not marked exact (%q)", fairPool, v)
	}
	var nP, nR, nU, nF int
	readyBy := map[string]int{}
	pipe := e.s.Client().Pipeline()
	sts := make([]interface{ Val() string }, len(m.order))
	for i, id := range m.order {
		sts[i] = pipe.HGet(e.ctx, p+"t:"+id, "st")
	}
	if _, err := pipe.Exec(e.ctx); err != nil {
		fail("read states: %v", err)
	}
	for i, id := range m.order {
		tk := m.tasks[id]
		// A lazily promoted task's record stays PENDING; reads resolve it.
		wantRaw := tk.state
		if tk.lazy && tk.state == task.Ready {
			wantRaw = task.Pending
		}
		if got := record.StateOf(sts[i].Val()); got != wantRaw {
			fail("task %s is %q in Redis, model says %s (lazy %v)", id, got, wantRaw, tk.lazy)
		}
		inDset := 0
		for k, s := range dsets {
			if s[id] {
				inDset++
				if tk.state != task.Pending || !tk.lazy || k != fmt.Sprintf("%s:%d", tk.pool, tk.prio) {
					fail("task %s (%s pool %q prio %d lazy %v) is in delayed set %s", id, tk.state, tk.pool, tk.prio, tk.lazy, k)
				}
			}
		}
		inReady := 0
		for k, s := range ready {
			if s[id] {
				inReady++
				if tk.state != task.Ready || k != fmt.Sprintf("%s:%d", tk.pool, tk.prio) {
					fail("task %s (%s pool %q prio %d) is in ready set %s", id, tk.state, tk.pool, tk.prio, k)
				}
			}
		}
		want := map[string]bool{
			"delayed": tk.state == task.Pending && !tk.inDue && !tk.lazy,
			"dset":    tk.state == task.Pending && tk.lazy,
			"due":     tk.state == task.Pending && tk.inDue,
			"running": tk.state == task.Running,
			"dead":    tk.state == task.Failed,
			"ready":   tk.state == task.Ready,
		}
		have := map[string]bool{"delayed": delayed[id], "dset": inDset == 1, "due": due[id], "running": running[id], "dead": dead[id], "ready": inReady == 1}
		if fmt.Sprint(want) != fmt.Sprint(have) {
			fail("task %s (%s): in %v, want %v", id, tk.state, have, want)
		}
		if tk.state == task.Pending && !tk.inDue && step%50 == 0 {
			key := p + "delayed"
			if tk.lazy {
				key = fmt.Sprintf("%sd:%s:%d", p, tk.pool, tk.prio)
			}
			s, err := e.s.Client().ZScore(e.ctx, key, id).Result()
			if err != nil && !tk.lazy {
				s, _ = e.s.Client().ZScore(e.ctx, p+"dn", id).Result()
			}
			if int64(s) != tk.due.UnixMilli() {
				fail("task %s due %d, model %d", id, int64(s), tk.due.UnixMilli())
			}
		}
		switch tk.state {
		case task.Pending:
			nP++
		case task.Ready:
			nR++
			readyBy[fmt.Sprintf("%s:%d", tk.pool, tk.prio)]++
		case task.Running:
			nU++
		case task.Failed:
			nF++
		}
	}
	c, err := e.s.Counts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pending != nP || c.Ready != nR || c.Running != nU || c.Dead != nF {
		fail("counts P%d R%d U%d F%d, model P%d R%d U%d F%d", c.Pending, c.Ready, c.Running, c.Dead, nP, nR, nU, nF)
	}
	for k, n := range readyBy {
		i := len(k) - 2
		pool, pr := k[:i], int(k[i+1]-'0')
		if c.ReadyBy[pool][pr] != n {
			fail("ready count %s = %d, model %d", k, c.ReadyBy[pool][pr], n)
		}
	}
	if total := len(delayed) + len(due) + len(running) + len(dead); total > len(m.tasks) {
		fail("structures hold %d entries for %d tasks", total, len(m.tasks))
	}
	if step%25 == 0 {
		// What readers see: every record's state as the model has it.
		ts, err := e.s.GetMany(e.ctx, 0, m.order)
		if err != nil {
			fail("read: %v", err)
		}
		for _, x := range ts {
			if tk := m.tasks[x.ID]; x.State != tk.state {
				fail("task %s reads %s, model %s (lazy %v)", x.ID, x.State, tk.state, tk.lazy)
			}
		}
	}
	if step%500 == 0 {
		m.checkTrails(t, e, fail)
	}
}

// checkTrails checks every recorded transition against the table.
func (m *model) checkTrails(t *testing.T, e *env, fail func(string, ...any)) {
	ids := append([]string(nil), m.order...)
	sort.Strings(ids)
	for _, id := range ids {
		tr, err := e.s.Trail(e.ctx, id)
		if err != nil {
			fail("trail %s: %v", id, err)
		}
		for _, x := range tr {
			if !task.Legal(x.From, x.To, x.Reason) {
				fail("task %s: illegal transition in trail %s→%s %s", id, x.From, x.To, x.Reason)
			}
		}
	}
}

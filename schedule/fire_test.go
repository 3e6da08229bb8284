package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/fedtest/fedapi"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/schedule/defs"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// schedInstance is one server's Scheduler with its own etcd client, so a
// test can crash it (close the client: nothing is resigned or revoked).
type schedInstance struct {
	id     string
	region string
	s      *Scheduler
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// scheduler attaches a Scheduler to a region's server (its API serves the
// schedule endpoints from then on); Start runs it. now nil is the real clock.
func (f *fed) scheduler(regionName, id string, now func() time.Time) *schedInstance {
	cli := f.Etcd.Client()
	s := New(cli, f.R(regionName).Node(), Config{Region: regionName, Regions: fedtest.Regions,
		ID: id, SessionTTL: testTTL, CallTimeout: 2 * time.Second,
		Logger: f.Log.With("server", regionName, "scheduler", id), Now: now})
	fedapi.ServeSchedules(f.R(regionName), s)
	return &schedInstance{id: id, region: regionName, s: s, cli: cli}
}

func (in *schedInstance) Start(t *testing.T) *schedInstance {
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel, in.done = cancel, make(chan struct{})
	go func() {
		defer close(in.done)
		_ = in.s.Run(ctx)
	}()
	t.Cleanup(in.Stop)
	return in
}

// Stop ends the instance gracefully (it resigns).
func (in *schedInstance) Stop() {
	in.once.Do(func() {
		in.cancel()
		<-in.done
	})
}

// Crash ends it as a dead process would: its etcd client goes first, so its
// election key stays until the lease expires. It winds down in the
// background (its etcd calls time out); Stop waits for it.
func (in *schedInstance) Crash() {
	_ = in.cli.Close()
	in.cancel()
}

func (f *fed) createSchedule(regionName, token string, body any) reply {
	f.T.Helper()
	return f.Call(http.MethodPost, f.R(regionName).URL()+"/v1/schedules", token, body)
}

func (f *fed) schedStore() defs.Store {
	return defs.New(f.EtcdCli, "/ax/", 5*time.Second)
}

// sched reads the one schedule named name (of any tenant).
func (f *fed) sched(name string) stored {
	f.T.Helper()
	defs, _, err := f.schedStore().List(context.Background())
	if err != nil {
		f.T.Fatal(err)
	}
	for _, sd := range defs {
		if sd.Def.Name == name {
			return sd
		}
	}
	f.T.Fatalf("no schedule %s", name)
	return stored{}
}

// slotID is the task id of a slot of tenant's schedule name as the
// scheduler derives it (tenant "": the legacy definition of name).
func (f *fed) slotID(tenant, name string, slot time.Time, home string) string {
	f.T.Helper()
	defs, _, err := f.schedStore().List(context.Background())
	if err != nil {
		f.T.Fatal(err)
	}
	for _, sd := range defs {
		if sd.Def.Name == name && (tenant == "" && sd.Legacy || tenant != "" && !sd.Legacy && sd.Tenant() == tenant) {
			return taskID(sd.IDSeq(), slot, home)
		}
	}
	f.T.Fatalf("no schedule %s of tenant %q", name, tenant)
	return ""
}

func (f *fed) schedState(name string) State {
	f.T.Helper()
	st, _, err := f.schedStore().State(context.Background(), f.sched(name))
	if err != nil {
		f.T.Fatal(err)
	}
	return st
}

// setLastSlot makes a schedule look as if its last slot handled was last.
func (f *fed) setLastSlot(name string, last time.Time) {
	f.T.Helper()
	sd := f.sched(name)
	b, _ := json.Marshal(State{DefRev: sd.Rev, LastSlot: last, LastOutcome: OutcomeFired})
	if _, err := f.EtcdCli.Put(context.Background(), f.schedStore().StateKey(sd.Key), string(b)); err != nil {
		f.T.Fatal(err)
	}
}

// waitingTasks lists the PENDING and READY tasks of a type in one region.
func (f *fed) waitingTasks(regionName, typ string) []*task.Task {
	f.T.Helper()
	var out []*task.Task
	err := f.R(regionName).Store.Tasks().Waiting(fedtest.Ctx(f.T), queue.Filter{Type: typ}, func(ts []*task.Task) error {
		out = append(out, ts...)
		return nil
	})
	if err != nil {
		f.T.Fatal(err)
	}
	return out
}

// fires counts the slots of tenant default's schedule name by outcome.
func fires(in *schedInstance, name, outcome string) float64 {
	return firesOf(in, "default", name, outcome)
}

func firesOf(in *schedInstance, tenant, name, outcome string) float64 {
	return testutil.ToFloat64(in.s.fires.WithLabelValues(tenant, name, outcome))
}

// A schedule firing every second
// runs for about 25 s while three schedulers on three regions compete for
// the federation election. The leader is deposed twice without resigning —
// once by revoking its lease while it keeps running, once by a crash — and
// then every scheduler dies at once for 5 s. Every slot that fired has
// exactly one task, under its derived id, in the home region; the gaps are
// handled by fire_once (one late task per gap at most).
func TestScheduleFailoverFiresEachSlotOnce(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	f := newFed(t)
	const name, typ = "tick", "sched.tick"
	inst := map[string]*schedInstance{}
	for _, r := range []string{gcp, az, aws} {
		inst["sched-"+r] = f.scheduler(r, "sched-"+r, nil)
	}
	// Home aws (the creating server's region); pinned there so no hand-off
	// moves the tasks.
	f.createSchedule(aws, tokOperator, spec{"name": name, "cron": "*/1 * * * * *",
		"task": spec{"type": typ, "regions": []string{aws}}}).Want(t, http.StatusCreated)

	ctx := fedtest.Ctx(t)
	leader := func() lease.Leader {
		var ld lease.Leader
		fedtest.Eventually(t, 15*time.Second, "a federation leader", func() bool {
			var err error
			ld, err = lease.Observe(ctx, f.EtcdCli, "/ax/elect/federation")
			return err == nil && inst[ld.Value] != nil && inst[ld.Value].s.Leading()
		})
		return ld
	}
	tokens := map[int64]bool{}
	// gcp leads first (tasks cross to aws through /v1/internal/enqueue),
	// then az, then aws (local enqueue).
	inst["sched-"+gcp].Start(t)
	fedtest.Eventually(t, 10*time.Second, "gcp leads", inst["sched-"+gcp].s.Leading)
	inst["sched-"+az].Start(t)
	inst["sched-"+aws].Start(t)
	time.Sleep(5 * time.Second)

	// 1. Depose the leader by revoking its lease: the next candidate takes
	// over at once while the old leader may still be mid-firing.
	l1 := leader()
	tokens[l1.Token] = true
	if _, err := f.EtcdCli.Revoke(ctx, l1.Lease); err != nil {
		t.Fatal(err)
	}
	fedtest.Eventually(t, 10*time.Second, "a new leader after the revoke", func() bool { return leader().Token != l1.Token })
	time.Sleep(5 * time.Second)

	// 2. Crash the leader: its key lives until its lease expires.
	l2 := leader()
	tokens[l2.Token] = true
	inst[l2.Value].Crash()
	inst[l2.Value+"-2"] = f.scheduler(inst[l2.Value].region, l2.Value+"-2", nil).Start(t)
	time.Sleep(5 * time.Second)

	// 3. Every scheduler dies at once; two come back 5 s later.
	tokens[leader().Token] = true
	outage := time.Now()
	for _, in := range inst {
		in.Crash()
	}
	time.Sleep(5 * time.Second)
	back := time.Now()
	again := []*schedInstance{f.scheduler(gcp, "sched-gcp-3", nil).Start(t), f.scheduler(az, "sched-az-3", nil).Start(t)}
	fedtest.Eventually(t, 10*time.Second, "a leader after the outage", func() bool {
		ld, err := lease.Observe(ctx, f.EtcdCli, "/ax/elect/federation")
		return err == nil && !tokens[ld.Token] && f.schedState(name).Leader == ld.Token
	})
	time.Sleep(3 * time.Second)
	tokens[f.schedState(name).Leader] = true
	for _, in := range again {
		in.Stop()
	}
	if len(tokens) < 4 {
		t.Errorf("%d leadership terms, want at least 4", len(tokens))
	}

	// Every task of the schedule is in the home region, under the derived id
	// of its slot: so no slot can have two.
	for _, r := range []string{gcp, az} {
		if ts := f.waitingTasks(r, typ); len(ts) > 0 {
			t.Errorf("%d scheduled tasks in %s, want none outside the home region", len(ts), r)
		}
	}
	bySlot := map[int64]*task.Task{}
	for _, tk := range f.waitingTasks(aws, typ) {
		p, err := task.ParseID(tk.ID)
		if err != nil {
			t.Fatalf("task %s: %v", tk.ID, err)
		}
		if want := f.slotID("default", name, p.Time, aws); tk.ID != want || p.Time.UnixMilli()%1000 != 0 {
			t.Errorf("task %s is not the derived id of a slot (want %s)", tk.ID, want)
		}
		if prev := bySlot[p.Time.Unix()]; prev != nil {
			t.Errorf("slot %v has two tasks: %s and %s", p.Time, prev.ID, tk.ID)
		}
		bySlot[p.Time.Unix()] = tk
	}
	if len(bySlot) == 0 {
		t.Fatal("nothing fired")
	}
	var slots []int64
	for s := range bySlot {
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	first, last := slots[0], slots[len(slots)-1]

	// Walk the slots. After a gap (slots without a task) fire_once fires the
	// latest missed slot, more than the tolerance after it, then the slots
	// still on time; any other task that late would be a second firing for
	// one gap (a catch-up).
	const tolerance = 2 * time.Second
	missing, inGap, gapInOutage, outageGap := 0, false, false, false
	var gaps []string
	for s := first; s <= last; s++ {
		tk, slot := bySlot[s], time.Unix(s, 0)
		if tk == nil {
			missing++
			if !inGap {
				gaps = append(gaps, slot.Format("15:04:05"))
				inGap, gapInOutage = true, false
			}
			if slot.After(outage) && slot.Before(back) {
				gapInOutage, outageGap = true, true
			}
			continue
		}
		lateness := tk.CreatedAt.Sub(slot)
		switch {
		case inGap && gapInOutage && lateness <= tolerance:
			t.Errorf("slot %v, first after the outage, fired %v after it: fire_once fires the latest missed slot", slot, lateness)
		case !inGap && lateness > tolerance+time.Second:
			t.Errorf("slot %v fired %v after it, and not first after a gap: a second missed slot fired", slot, lateness)
		}
		inGap = false
	}
	total := int(last - first + 1)
	t.Logf("slots %d..%d: %d fired, %d missing in gaps starting %v; %d terms",
		first, last, len(bySlot), missing, gaps, len(tokens))
	if !outageGap {
		t.Errorf("no slot missing during the 5 s outage: fire_once should have skipped all but the latest")
	}
	if len(bySlot) < total*6/10 {
		t.Errorf("only %d of %d slots fired", len(bySlot), total)
	}
}

// Overlap forbid skips slots while the previous run is unfinished; replace
// cancels it and fires.
func TestScheduleOverlap(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	f := newFed(t)
	in := f.scheduler(aws, "sched", nil)
	// forbid's tasks go to aws/gpu, replace's to aws/cpu, so each claim
	// takes its own schedule's task.
	f.createSchedule(aws, tokOperator, spec{"name": "guarded", "cron": "*/1 * * * * *", "overlap": "forbid",
		"task": spec{"type": "sched.guarded", "regions": []string{aws}, "tags": spec{"gpu": "l4"}}}).Want(t, http.StatusCreated)
	f.createSchedule(aws, tokOperator, spec{"name": "replacer", "cron": "*/2 * * * * *", "overlap": "replace",
		"task": spec{"type": "sched.replacer", "regions": []string{aws}, "tags": spec{"class": "on-demand"}}}).Want(t, http.StatusCreated)
	in.Start(t)
	st := f.R(aws).Store
	ctx := fedtest.Ctx(t)

	// claim claims the schedule's waiting task in pool: its latest run
	// (forbid fires no other; replace cancels the older one before firing).
	claim := func(t *testing.T, name, pool string) *task.Task {
		t.Helper()
		var got *task.Task
		fedtest.Eventually(t, 10*time.Second, name+" fires and its run is claimed", func() bool {
			ts, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: pool, Worker: "w-" + name, N: 1})
			if err != nil || len(ts) == 0 {
				return false
			}
			got = ts[0]
			return true
		})
		if p, err := task.ParseID(got.ID); err != nil || got.ID != f.slotID("default", name, p.Time, aws) {
			t.Fatalf("claimed %s, not a run of %s", got.ID, name)
		}
		return got
	}

	t.Run("forbid", func(t *testing.T) {
		run := claim(t, "guarded", poolGPU)
		fedtest.Eventually(t, 10*time.Second, "two slots skipped", func() bool {
			return fires(in, "guarded", OutcomeSkippedOverlap) >= 2
		})
		if s := f.schedState("guarded"); s.LastOutcome != OutcomeSkippedOverlap || s.LastTaskID != run.ID {
			t.Errorf("state %+v, want the last slot skipped and %s the last task", s, run.ID)
		}
		if ts := f.waitingTasks(aws, "sched.guarded"); len(ts) != 0 {
			t.Errorf("%d more tasks while the first runs", len(ts))
		}
		if errs, err := st.Claimer().Complete(ctx, queue.Completion{ID: run.ID, Token: run.LeaseToken}); err != nil || errs[0] != nil {
			t.Fatalf("complete: %v %v", err, errs)
		}
		fedtest.Eventually(t, 5*time.Second, "a new run once the first finished", func() bool {
			s := f.schedState("guarded")
			return s.LastOutcome == OutcomeFired && s.LastTaskID != run.ID
		})
	})

	t.Run("replace", func(t *testing.T) {
		run := claim(t, "replacer", poolCPU)
		p, _ := task.ParseID(run.ID)
		var next string
		fedtest.Eventually(t, 5*time.Second, "the next slot fires", func() bool {
			s := f.schedState("replacer")
			next = s.LastTaskID
			return s.LastFiredSlot != nil && s.LastFiredSlot.After(p.Time)
		})
		tk, err := st.Get(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !tk.CancelRequested && tk.State != task.Canceled {
			t.Errorf("the running run was not asked to stop: %s cancel_requested=%v", tk.State, tk.CancelRequested)
		}
		// The next slot replaces the waiting run at once (READY → CANCELED).
		fedtest.Eventually(t, 5*time.Second, next+" replaced by the slot after", func() bool {
			tk, err := st.Get(ctx, next)
			return err == nil && tk.State == task.Canceled && f.schedState("replacer").LastTaskID != next
		})
	})
}

// Misfire policies and pause/resume, with the scheduler's clock frozen at F
// and each schedule's last slot 20 s before it: slots F-19 … F-3 are missed
// (older than the 2 s tolerance), F-2 … F are on time.
func TestScheduleMisfire(t *testing.T) {
	t.Parallel()
	f := newFed(t)
	// An hour ahead of the stores' clock: a run the jitter puts after F
	// stays delayed, due at exactly its slot + offset.
	F := time.Now().Add(time.Hour).Truncate(time.Second)
	in := f.scheduler(aws, "sched", func() time.Time { return F })
	type tc struct {
		name    string
		body    spec
		fired   []int // seconds before F that get a task
		skipped float64
	}
	every := func(extra spec) spec {
		b := spec{"cron": "*/1 * * * * *", "task": spec{"type": "sched.misfire", "regions": []string{aws}}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	cases := []tc{
		{name: "mf-skip", body: every(spec{"misfire": "skip"}), fired: []int{2, 1, 0}, skipped: 17},
		{name: "mf-once", body: every(nil), fired: []int{3, 2, 1, 0}, skipped: 16},
		{name: "mf-catchup", body: every(spec{"misfire": "catch_up", "catch_up_limit": 5}), fired: []int{7, 6, 5, 4, 3, 2, 1, 0}, skipped: 12},
		{name: "mf-jitter", body: every(spec{"misfire": "skip", "jitter": "900ms"}), fired: []int{2, 1, 0}, skipped: 17},
	}
	for _, c := range cases {
		c.body["name"] = c.name
		f.createSchedule(aws, tokOperator, c.body).Want(t, http.StatusCreated)
		f.setLastSlot(c.name, F.Add(-20*time.Second))
	}
	paused := every(spec{"name": "mf-paused", "paused": true})
	f.createSchedule(aws, tokOperator, paused).Want(t, http.StatusCreated)
	f.setLastSlot("mf-paused", F.Add(-20*time.Second))
	// Definitions and states stored before tenants had namespaces, at
	// /ax/schedules/<name>: acme's mf-legacy, and globex's mf-shared,
	// whose name tenant default then takes in its own namespace.
	legacy := func(name, tenant string) {
		d := spec{"name": name, "cron": "*/1 * * * * *", "timezone": "UTC", "home_region": aws, "misfire": "catch_up",
			"catch_up_limit": 5, "overlap": "allow", "created_at": F.Add(-time.Hour), "created_by": "oncall",
			"task": spec{"type": "sched.legacy", "tenant": tenant, "regions": []string{aws}}}
		b, _ := json.Marshal(d)
		put, err := f.EtcdCli.Put(context.Background(), "/ax/schedules/"+name, string(b))
		if err != nil {
			t.Fatal(err)
		}
		b, _ = json.Marshal(State{DefRev: put.Header.Revision, LastSlot: F.Add(-20 * time.Second), LastOutcome: OutcomeFired})
		if _, err := f.EtcdCli.Put(context.Background(), "/ax/schedule-state/"+name, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	legacy("mf-legacy", "acme")
	legacy("mf-shared", "globex")
	shared := every(spec{"name": "mf-shared", "misfire": "skip"})
	f.createSchedule(aws, tokOperator, shared).Want(t, http.StatusCreated)
	f.setLastSlot("mf-shared", F.Add(-20*time.Second))
	in.Start(t)

	ctx := fedtest.Ctx(t)
	var checkOf func(t *testing.T, idTenant, name string, fired []int)
	check := func(t *testing.T, name string, fired []int) {
		t.Helper()
		checkOf(t, "default", name, fired)
	}
	checkOf = func(t *testing.T, idTenant, name string, fired []int) {
		t.Helper()
		want := map[int]bool{}
		for _, s := range fired {
			want[s] = true
		}
		for s := 19; s >= 0; s-- {
			slot := F.Add(-time.Duration(s) * time.Second)
			_, err := f.R(aws).Store.Get(ctx, f.slotID(idTenant, name, slot, aws))
			if got := err == nil; got != want[s] {
				t.Errorf("slot F-%ds: task %v, want %v (err %v)", s, got, want[s], err)
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fedtest.Eventually(t, 10*time.Second, c.name+" reaches F", func() bool { return f.schedState(c.name).LastSlot.Equal(F) })
			check(t, c.name, c.fired)
			if got := fires(in, c.name, OutcomeMisfireSkipped); got != c.skipped {
				t.Errorf("misfire_skipped %v, want %v", got, c.skipped)
			}
			if got := fires(in, c.name, OutcomeFired); got != float64(len(c.fired)) {
				t.Errorf("fired %v, want %d", got, len(c.fired))
			}
		})
	}
	t.Run("legacy layout", func(t *testing.T) {
		// Each legacy definition goes on from its state (12 missed slots
		// since F-20 s, not an hour's since its creation), under the ids
		// it had; the new mf-shared fires beside globex's, ids apart.
		lstate := func(name string) State {
			r, err := f.EtcdCli.Get(context.Background(), "/ax/schedule-state/"+name)
			if err != nil || len(r.Kvs) == 0 {
				t.Fatalf("legacy state of %s: %v", name, err)
			}
			var st State
			_ = json.Unmarshal(r.Kvs[0].Value, &st)
			return st
		}
		for _, c := range []struct{ name, tenant string }{{"mf-legacy", "acme"}, {"mf-shared", "globex"}} {
			fedtest.Eventually(t, 10*time.Second, c.name+" (legacy) reaches F", func() bool { return lstate(c.name).LastSlot.Equal(F) })
			checkOf(t, "", c.name, []int{7, 6, 5, 4, 3, 2, 1, 0})
			if got := firesOf(in, c.tenant, c.name, OutcomeMisfireSkipped); got != 12 {
				t.Errorf("%s: misfire_skipped %v, want 12", c.name, got)
			}
		}
		fedtest.Eventually(t, 10*time.Second, "mf-shared (default) reaches F", func() bool {
			st, _, err := f.schedStore().State(ctx, stored{Def: &apiv1.Schedule{Name: "mf-shared"}, Key: "/ax/schedules/default/mf-shared"})
			return err == nil && st.LastSlot.Equal(F)
		})
		check(t, "mf-shared", []int{2, 1, 0})
		// The API finds a legacy definition as its tenant's, and changes
		// it where it is.
		url := f.R(aws).URL() + "/v1/schedules"
		var st apiv1.ScheduleStatus
		f.Call(http.MethodGet, url+"/mf-legacy", tokAcme, nil).Want(t, http.StatusOK).JSON(t, &st)
		if st.Task == nil || st.Task.Tenant != "acme" || st.LastSlot == nil {
			t.Errorf("acme reads its legacy schedule as %+v", st)
		}
		f.Call(http.MethodGet, url+"/mf-legacy", tokGlobex, nil).Want(t, http.StatusNotFound)
		f.Call(http.MethodGet, url+"/mf-shared", tokGlobex, nil).Want(t, http.StatusOK).JSON(t, &st)
		if st.Task.Tenant != "globex" || st.Misfire != MisfireCatchUp {
			t.Errorf("globex reads mf-shared as %+v, want its legacy one", st)
		}
		if e := f.Call(http.MethodGet, url+"/mf-shared", tokOperator, nil).Want(t, http.StatusConflict).Err(t); e.Field != "tenant" {
			t.Errorf("mf-shared for every tenant: %+v, want 409 naming tenant", e)
		}
		f.Call(http.MethodGet, url+"/mf-shared?tenant=default", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &st)
		if st.Misfire != MisfireSkip {
			t.Errorf("default's mf-shared: %+v", st)
		}
		f.Call(http.MethodPost, url+"/mf-shared/pause?tenant=globex", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &st)
		if !st.Paused || st.Task.Tenant != "globex" || f.sched("mf-legacy").Legacy != true {
			t.Errorf("paused globex's: %+v", st)
		}
		f.Call(http.MethodDelete, url+"/mf-shared?tenant=globex", tokOperator, nil).Want(t, http.StatusOK)
		if r, _ := f.EtcdCli.Get(context.Background(), "/ax/schedule", clientv3.WithPrefix(), clientv3.WithKeysOnly()); r != nil {
			for _, kv := range r.Kvs {
				if k := string(kv.Key); k == "/ax/schedules/mf-shared" || k == "/ax/schedule-state/mf-shared" {
					t.Errorf("%s left after its deletion", k)
				}
			}
		}
		f.Call(http.MethodGet, url+"/mf-shared", tokOperator, nil).Want(t, http.StatusOK)
	})
	t.Run("jitter delays the run", func(t *testing.T) {
		off := jitterOffset("mf-jitter", F, 900*time.Millisecond)
		tk, err := f.R(aws).Store.Get(ctx, f.slotID("default", "mf-jitter", F, aws))
		if err != nil {
			t.Fatal(err)
		}
		if off > 0 && (tk.DueAt == nil || !tk.DueAt.Equal(F.Add(off))) {
			t.Errorf("due at %v, want slot + %v", tk.DueAt, off)
		}
	})
	t.Run("paused, then resumed", func(t *testing.T) {
		if s := f.schedState("mf-paused"); !s.LastSlot.Equal(F.Add(-20 * time.Second)) {
			t.Fatalf("a paused schedule moved: %+v", s)
		}
		check(t, "mf-paused", nil)
		var st apiv1.ScheduleStatus
		f.Call(http.MethodPost, f.R(aws).URL()+"/v1/schedules/mf-paused/resume", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &st)
		if st.Paused || st.NextSlot == nil {
			t.Errorf("resumed: %+v", st)
		}
		fedtest.Eventually(t, 10*time.Second, "mf-paused reaches F", func() bool { return f.schedState("mf-paused").LastSlot.Equal(F) })
		check(t, "mf-paused", []int{3, 2, 1, 0}) // fire_once over the paused gap
	})
}

// The API: validation names the field; create, read, list, pause, resume,
// delete; roles and tenants; the internal enqueue endpoint.
func TestScheduleAPI(t *testing.T) {
	t.Parallel()
	f := newFed(t)
	for _, r := range fedtest.Regions {
		f.scheduler(r, "sched-"+r, nil) // attached, not running: the API needs only etcd
	}
	base := func() spec {
		return spec{"name": "nightly", "cron": "0 0 2 * * *", "timezone": "Europe/Paris", "task": spec{"type": "report.generate", "tenant": "acme"}}
	}
	with := func(k string, v any) spec {
		b := base()
		b[k] = v
		return b
	}
	task := func(k string, v any) spec {
		b := base()
		b["task"].(spec)[k] = v
		return b
	}
	invalid := []struct {
		name  string
		body  any
		field string
	}{
		{"unknown field", with("colour", "blue"), "colour"},
		{"unknown task field", task("colour", "blue"), "task.colour"},
		{"bad cron", with("cron", "0 0 25 * * *"), "cron"},
		{"cron with a zone", with("cron", "CRON_TZ=UTC 0 0 2 * * *"), "cron"},
		{"four fields", with("cron", "0 2 * *"), "cron"},
		{"bad timezone", with("timezone", "Europe/Atlantis"), "timezone"},
		{"no task", with("task", nil), "task"},
		{"task without type", with("task", spec{"priority": 1}), "task.type"},
		{"task priority", task("priority", 9), "task.priority"},
		{"task run_at", task("run_at", "2030-01-01T00:00:00Z"), "task.run_at"},
		{"task idempotency key", task("idempotency_key", "k"), "task.idempotency_key"},
		{"bad name", with("name", "Nightly_Report"), "name"},
		{"no name", with("name", ""), "name"},
		{"home region", with("home_region", "moon-1"), "home_region"},
		{"task region outside the federation", task("regions", []string{"moon-1"}), "task.regions[0]"},
		{"misfire", with("misfire", "sometimes"), "misfire"},
		{"overlap", with("overlap", "queue"), "overlap"},
		{"catch_up_limit without catch_up", with("catch_up_limit", 3), "catch_up_limit"},
		{"jitter", with("jitter", "soon"), "jitter"},
		{"jitter as long as the interval", with("jitter", "24h"), "jitter"},
		{"paused type", with("paused", "yes"), "paused"},
	}
	for _, tc := range invalid {
		t.Run("400 "+tc.name, func(t *testing.T) {
			rep := f.createSchedule(aws, tokOperator, tc.body).Want(t, http.StatusBadRequest)
			if e := rep.Err(t); e.Field != tc.field {
				t.Errorf("field %q, want %q (%s)", e.Field, tc.field, e.Message)
			}
		})
	}
	t.Run("roles and tenants", func(t *testing.T) {
		f.createSchedule(aws, tokAcme, base()).Want(t, http.StatusForbidden)
		rep := f.createSchedule(aws, tokGlobexOps, task("tenant", "acme")).Want(t, http.StatusForbidden)
		if e := rep.Err(t); e.Field != "task.tenant" {
			t.Errorf("field %q, want task.tenant", e.Field)
		}
		f.Call(http.MethodPost, f.R(aws).URL()+"/v1/internal/enqueue", tokOperator,
			spec{"id": TaskID("acme", "x", time.Now(), aws), "spec": spec{"type": "x"}}).Want(t, http.StatusForbidden)
	})

	url := f.R(aws).URL() + "/v1/schedules"
	var created apiv1.ScheduleStatus
	f.createSchedule(aws, tokOperator, base()).Want(t, http.StatusCreated).JSON(t, &created)
	if created.HomeRegion != aws || created.Misfire != MisfireFireOnce || created.Overlap != OverlapAllow ||
		created.NextSlot == nil || created.LastFiredSlot != nil || created.CreatedBy != "oncall" {
		t.Errorf("created: %+v", created)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	if next := created.NextSlot.In(paris); next.Hour() != 2 || next.Minute() != 0 || !next.After(time.Now()) {
		t.Errorf("next slot %v, want 02:00 Paris time", created.NextSlot)
	}
	rep := f.createSchedule(gcp, tokOperator, base()).Want(t, http.StatusConflict)
	if e := rep.Err(t); e.Field != "name" {
		t.Errorf("409 names %q, want name", e.Field)
	}
	t.Run("a namespace per tenant", func(t *testing.T) {
		// globex's nightly neither conflicts with acme's nor tells it
		// exists; each tenant reads, pauses and deletes its own.
		mine := base()
		delete(mine["task"].(spec), "tenant")
		var g, st apiv1.ScheduleStatus
		f.createSchedule(aws, tokGlobexOps, mine).Want(t, http.StatusCreated).JSON(t, &g)
		if g.Task == nil || g.Task.Tenant != "globex" {
			t.Fatalf("globex's nightly: %+v", g)
		}
		if e := f.createSchedule(aws, tokGlobexOps, mine).Want(t, http.StatusConflict).Err(t); e.Field != "name" {
			t.Errorf("globex's second nightly: %+v", e)
		}
		if e := f.Call(http.MethodPost, url+"?tenant=globex", tokOperator, mine).Want(t, http.StatusBadRequest).Err(t); e.Field != "tenant" || !strings.Contains(e.Message, "task.tenant") {
			t.Errorf("a create with ?tenant=: %+v, want 400 naming tenant", e)
		}
		slot := time.Date(2030, 1, 1, 2, 0, 0, 0, time.UTC)
		if TaskID("globex", "nightly", slot, aws) == TaskID("acme", "nightly", slot, aws) {
			t.Errorf("two tenants' nightly share task ids")
		}
		read := func(path, token string) (apiv1.ScheduleStatus, reply) {
			var st apiv1.ScheduleStatus
			rep := f.Call(http.MethodGet, url+path, token, nil)
			if rep.Status == http.StatusOK {
				rep.JSON(t, &st)
			}
			return st, rep
		}
		for _, c := range []struct{ token, query, tenant string }{
			{tokGlobex, "", "globex"}, {tokAcme, "", "acme"}, {tokOperator, "?tenant=acme", "acme"},
			{tokOperator, "?tenant=globex", "globex"}, {tokAcme, "?tenant=acme", "acme"},
		} {
			if st, rep := read("/nightly"+c.query, c.token); rep.Status != http.StatusOK || st.Task.Tenant != c.tenant {
				t.Errorf("GET nightly%s as %s: %d %s, want %s's", c.query, c.token, rep.Status, rep.Body, c.tenant)
			}
		}
		if _, rep := read("/nightly", tokOperator); rep.Status != http.StatusConflict || rep.Err(t).Field != "tenant" {
			t.Errorf("GET nightly of every tenant: %d %s, want 409 naming tenant", rep.Status, rep.Body)
		}
		for _, path := range []string{"/nightly?tenant=acme", "?tenant=acme"} {
			if _, rep := read(path, tokGlobex); rep.Status != http.StatusForbidden || rep.Err(t).Field != "tenant" || rep.Err(t).Code != apiv1.CodeForbidden {
				t.Errorf("globex naming acme (%s): %d %s, want 403 forbidden naming tenant", path, rep.Status, rep.Body)
			}
		}
		if _, rep := read("?tenants=acme", tokOperator); rep.Status != http.StatusBadRequest || rep.Err(t).Field != "tenants" {
			t.Errorf("an unknown parameter: %d %s", rep.Status, rep.Body)
		}
		var list apiv1.ScheduleList
		f.Call(http.MethodGet, url+"?tenant=globex", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &list)
		if len(list.Schedules) != 1 || list.Schedules[0].Task.Tenant != "globex" {
			t.Errorf("globex's schedules: %+v", list)
		}
		f.Call(http.MethodPost, url+"/nightly/pause", tokGlobexOps, nil).Want(t, http.StatusOK).JSON(t, &st)
		if !st.Paused || st.Task.Tenant != "globex" {
			t.Errorf("globex paused %+v", st)
		}
		if st, _ := read("/nightly", tokAcme); st.Paused {
			t.Errorf("globex's pause paused acme's nightly")
		}
		f.Call(http.MethodDelete, url+"/nightly", tokGlobexOps, nil).Want(t, http.StatusOK)
		f.Call(http.MethodGet, url+"/nightly", tokGlobex, nil).Want(t, http.StatusNotFound)
		if _, rep := read("/nightly", tokOperator); rep.Status != http.StatusOK {
			t.Errorf("acme's nightly after globex deleted its own: %d", rep.Status)
		}
	})
	t.Run("ids never collide", func(t *testing.T) {
		// Names whose derived ids collide, across tenants and within one,
		// and two tenants' schedules of one name: each is created (never
		// 409 for another's schedule) and every schedule's ids are its own.
		type owned struct{ tenant, name string }
		seen := map[uint64]owned{}
		var cross, same [2]owned
		for i := 0; cross[0].name == "" || same[0].name == ""; i++ {
			for _, tn := range []string{"acme", "globex"} {
				o := owned{tn, fmt.Sprintf("c%d", i)}
				seq := derivedSeq(o.tenant, o.name)
				if prev, ok := seen[seq]; ok {
					switch {
					case prev.tenant != o.tenant && cross[0].name == "":
						cross = [2]owned{prev, o}
					case prev.tenant == o.tenant && same[0].name == "":
						same = [2]owned{prev, o}
					}
					continue
				}
				seen[seq] = o
			}
		}
		body := func(o owned) spec {
			return spec{"name": o.name, "cron": "@daily", "task": spec{"type": "x", "tenant": o.tenant}}
		}
		created := []owned{cross[0], cross[1], same[0], same[1], {"acme", "twin"}, {"globex", "twin"}}
		for _, o := range created {
			tok := tokOperator
			if o.tenant == "globex" {
				tok = tokGlobexOps
			}
			f.createSchedule(aws, tok, body(o)).Want(t, http.StatusCreated)
		}
		slot := time.Date(2030, 1, 1, 2, 0, 0, 0, time.UTC)
		ids := map[string]owned{}
		for _, o := range created {
			id := f.slotID(o.tenant, o.name, slot, aws)
			if prev, ok := ids[id]; ok {
				t.Errorf("%s/%s and %s/%s share task id %s", prev.tenant, prev.name, o.tenant, o.name, id)
			}
			ids[id] = o
			if id == TaskID(o.tenant, o.name, slot, aws) {
				t.Errorf("%s/%s: its ids are the ones anyone derives from its name (%s)", o.tenant, o.name, id)
			}
			f.Call(http.MethodDelete, url+"/"+o.name+"?tenant="+o.tenant, tokOperator, nil).Want(t, http.StatusOK)
		}
	})
	// A schedule created on gcp is homed there; every server sees both.
	var onGCP apiv1.ScheduleStatus
	f.createSchedule(gcp, tokGlobexOps, spec{"name": "globex-hourly", "cron": "@hourly", "task": spec{"type": "etl"}}).
		Want(t, http.StatusCreated).JSON(t, &onGCP)
	if onGCP.HomeRegion != gcp || onGCP.Task.Tenant != "globex" {
		t.Errorf("created on gcp by globex: home %s tenant %q", onGCP.HomeRegion, onGCP.Task.Tenant)
	}
	var list apiv1.ScheduleList
	f.Call(http.MethodGet, f.R(az).URL()+"/v1/schedules", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &list)
	if len(list.Schedules) != 2 || list.Schedules[0].Name != "globex-hourly" || list.Schedules[1].Name != "nightly" {
		t.Errorf("list: %+v", list)
	}
	f.Call(http.MethodGet, f.R(az).URL()+"/v1/schedules", tokGlobex, nil).Want(t, http.StatusOK).JSON(t, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Name != "globex-hourly" {
		t.Errorf("globex sees %+v, want only its own", list)
	}
	// Another tenant's schedule is 404 naming the name, as a missing one.
	if e := f.Call(http.MethodGet, url+"/nightly", tokGlobex, nil).Want(t, http.StatusNotFound).Err(t); e.Code != apiv1.CodeNotFound || e.Field != "name" {
		t.Errorf("another tenant's schedule: %+v", e)
	}
	f.Call(http.MethodPost, url+"/nightly/pause", tokGlobexOps, nil).Want(t, http.StatusNotFound)

	var st apiv1.ScheduleStatus
	f.Call(http.MethodPost, url+"/nightly/pause", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &st)
	if !st.Paused || st.NextSlot != nil {
		t.Errorf("paused: %+v", st)
	}
	f.Call(http.MethodGet, f.R(gcp).URL()+"/v1/schedules/nightly", tokAcme, nil).Want(t, http.StatusOK).JSON(t, &st)
	if !st.Paused {
		t.Errorf("gcp reads it unpaused")
	}
	f.Call(http.MethodPost, url+"/nightly/resume", tokOperator, nil).Want(t, http.StatusOK).JSON(t, &st)
	if st.Paused || st.NextSlot == nil {
		t.Errorf("resumed: %+v", st)
	}
	f.Call(http.MethodPost, url+"/nightly/pause", tokAcme, nil).Want(t, http.StatusForbidden)
	f.Call(http.MethodDelete, url+"/nightly", tokOperator, nil).Want(t, http.StatusOK)
	f.Call(http.MethodDelete, url+"/nightly", tokOperator, nil).Want(t, http.StatusNotFound)
	f.Call(http.MethodGet, url+"/nightly", tokOperator, nil).Want(t, http.StatusNotFound)
	f.Call(http.MethodPost, url+"/nightly/resume", tokOperator, nil).Want(t, http.StatusNotFound)

	t.Run("internal enqueue", func(t *testing.T) {
		slot := time.Now().Truncate(time.Second)
		id := TaskID("acme", "nightly", slot, aws)
		enqueue := func(region, id string) reply {
			return f.Call(http.MethodPost, f.R(region).URL()+"/v1/internal/enqueue", tokCluster,
				spec{"id": id, "spec": spec{"type": "report.generate", "regions": []string{aws}}})
		}
		var r apiv1.ScheduleEnqueueResponse
		enqueue(aws, id).Want(t, http.StatusOK).JSON(t, &r)
		if !r.Created || r.ID != id {
			t.Errorf("first: %+v", r)
		}
		enqueue(aws, id).Want(t, http.StatusOK).JSON(t, &r)
		if r.Created {
			t.Errorf("second enqueue of one id created it again")
		}
		if e := enqueue(gcp, id).Want(t, http.StatusBadRequest).Err(t); e.Field != "id" {
			t.Errorf("an id of another region: field %q", e.Field)
		}
		if e := enqueue(aws, "nope").Want(t, http.StatusBadRequest).Err(t); e.Field != "id" {
			t.Errorf("a malformed id: field %q", e.Field)
		}
	})
}

// A schedule's slots are checked against the tenant's max_backlog in the
// submit script (docs/security.md): four every-second schedules created at
// once, each passing the creation's read of the backlog, and no worker,
// leave exactly the limit of tasks; the other slots are rejected.
func TestScheduleSlotsKeepTheBacklogCap(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	const limit, schedules = 2, 4
	f := newFed(t, fedtest.WithBacklog(aws, "acme", limit))
	in := f.scheduler(aws, "sched", nil)
	var wg sync.WaitGroup
	codes := make([]int, schedules)
	for i := range schedules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = f.createSchedule(aws, tokOperator, spec{"name": "capped-" + string(rune('a'+i)), "cron": "* * * * * *",
				"task": spec{"type": "sched.capped", "tenant": "acme", "regions": []string{aws}, "tags": spec{"gpu": "l4"}}}).Status
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusCreated {
			t.Fatalf("schedule %d: %d, want 201 (the backlog is empty)", i, c)
		}
	}
	in.Start(t)
	rejected := func() float64 {
		n := 0.0
		for i := range schedules {
			n += firesOf(in, "acme", "capped-"+string(rune('a'+i)), OutcomeRejected)
		}
		return n
	}
	fedtest.Eventually(t, 10*time.Second, "slots past the limit rejected", func() bool { return rejected() >= schedules })
	if ts := f.waitingTasks(aws, "sched.capped"); len(ts) != limit {
		t.Fatalf("%d tasks of the schedules wait, want exactly max_backlog %d", len(ts), limit)
	}
	if n, err := f.R(aws).Store.Submitter().Backlog(fedtest.Ctx(t), "acme"); err != nil || n != limit {
		t.Fatalf("acme's backlog %d (%v), want %d", n, err, limit)
	}
}

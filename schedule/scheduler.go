package schedule

import (
	"context"
	"errors"
	"github.com/ax-sched/ax/schedule/slots"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/schedule/defs"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Enqueuer is what the scheduler needs of the federation; federation.Node
// implements it. Every call has a deadline (Config.CallTimeout).
type Enqueuer interface {
	// Enqueue submits sp, under the fixed id, into the region home,
	// unplaced (that region's leader places it when due), and at most
	// once: created is false when a task with the id exists already.
	// refused is set, and err nil, when home refuses the task itself (it
	// is invalid there): sending it again cannot help. err is for no
	// answer (the region unreachable, its store failing): the slot is
	// tried again. A refusal with a BudgetExceeded method that returns
	// true is the schedule's tenant's budget (past it, over_budget:
	// refuse): that slot is given up, the next fire once the budget
	// allows.
	Enqueue(ctx context.Context, home, id string, sp *task.Spec) (created bool, refused, err error)
	// Unfinished reports whether the task id exists in some region and has
	// not ended. A task no region knows (expired after its retention) has
	// finished.
	Unfinished(ctx context.Context, id string) (bool, error)
	// CancelTask asks the task id to stop wherever it is held, recorded as
	// by; a task missing or ended already is not an error.
	CancelTask(ctx context.Context, id, by string) error
}

// Config configures the schedules of one server. Zero values take the
// defaults named.
type Config struct {
	Region  string   // this server's region: the default home region
	Regions []string // the federation's regions: the home regions allowed (default [Region])
	// Defaults are the task defaults a schedule's task is checked with at
	// creation, as its home region will at each firing (default
	// task.DefaultDefaults()).
	Defaults   task.Defaults
	Prefix     string        // etcd key prefix (default "/ax/")
	ID         string        // this server's value in the federation election (default Region)
	SessionTTL time.Duration // of the federation election (default lease.DefaultSessionTTL)
	// Tolerance is how late a slot may be reached and still fire as on time
	// (default 2s); older slots are missed and the misfire policy decides.
	Tolerance time.Duration
	// CallTimeout bounds each etcd request and each call through the
	// Enqueuer (default 5s).
	CallTimeout time.Duration
	// Limits returns a tenant's limits (read at each use, so a reload
	// applies at once); nil: the defaults (Limits).
	Limits func(tenant string) Limits
	// DAGs starts the runs of DAG schedules (nil: a DAG schedule is
	// refused at creation, 503).
	DAGs DAGStarter
	// BudgetRoom refuses a tenant past its monthly budget (an error with a
	// BudgetExceeded method that returns true): a DAG schedule's slot is
	// then given up, as a task's is by Enqueuer.Enqueue. nil: no budgets.
	BudgetRoom func(tenant string) error
	Registerer prometheus.Registerer // nil: metrics are not registered
	Logger     *slog.Logger
	Now        func() time.Time // the clock slots are compared with (tests inject one)
}

// Scheduler serves a server's schedules: the API reads and writes
// definitions through it (service.go), and Run campaigns in the federation
// election (<prefix>elect/federation) and, while it leads, fires the
// schedules.
//
// <prefix>schedules/<name> holds a definition (apiv1.Schedule), written
// through the API; only pause and resume change it after creation.
// <prefix>schedule-state/<name> holds the last slot handled (fired or
// skipped, State), written only by the federation leader in a transaction
// that compares its election key, so a deposed leader cannot move it.
// <prefix>schedule-ends/<tenant>/<name> holds the last end of a DAG run the
// schedule started, written by the run's home region: every region watches
// it to wake the gates waiting for it (package schedule/ends). A
// slot's task id is derived from (schedule, slot) (TaskID): the leader
// enqueues the task into the schedule's home region first and records the
// slot second, so a leader that dies in between makes its successor enqueue
// the same id again, which the store refuses (task.ErrExists).
//
// It reaches tasks only through Enqueuer. Errors a caller sees are
// *apiv1.Error (conflict, not found, unavailable) or *task.FieldError, so
// the API maps them without importing this package.
type Scheduler struct {
	tasks   Enqueuer
	store   defs.Store
	cfg     Config
	log     *slog.Logger
	fires   *prometheus.CounterVec
	leader  prometheus.Gauge
	leading atomic.Bool
	// createMu serialises Create on this server (service.go).
	createMu sync.Mutex
}

// Outcomes of a slot: the outcome label of ax_schedule_fires_total, and
// State.LastOutcome.
const (
	OutcomeFired          = "fired"           // its task was enqueued
	OutcomeAlreadyFired   = "already_fired"   // its task existed (an earlier leader enqueued it)
	OutcomeSkippedOverlap = "skipped_overlap" // overlap forbid: the previous run had not finished
	OutcomeMisfireSkipped = "misfire_skipped" // missed, and the misfire policy gave it up
	OutcomeRejected       = "rejected"        // the home region refused the task for good (invalid there)
	OutcomeBudgetExceeded = "budget_exceeded" // its tenant is past its monthly budget (over_budget: refuse)
	OutcomeDeferred       = "deferred"        // a pass left a due slot for the next (home unreachable, in its memory reserve); never LastOutcome
)

// New prepares the schedules kept in the global etcd c, fired through
// tasks.
func New(c *clientv3.Client, tasks Enqueuer, cfg Config) *Scheduler {
	if cfg.Prefix == "" {
		cfg.Prefix = "/ax/"
	}
	if len(cfg.Regions) == 0 {
		cfg.Regions = []string{cfg.Region}
	}
	if cfg.Defaults == (task.Defaults{}) {
		cfg.Defaults = task.DefaultDefaults()
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = lease.DefaultSessionTTL
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = 2 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ID == "" {
		cfg.ID = cfg.Region
	}
	s := &Scheduler{
		tasks: tasks, cfg: cfg, log: cfg.Logger.With("component", "schedules"),
		store: defs.New(c, cfg.Prefix, cfg.CallTimeout),
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_schedule_fires_total",
			Help: "Slots of cron schedules handled by the federation leader, by tenant, schedule and outcome (fired, already_fired, skipped_overlap, misfire_skipped, rejected, budget_exceeded; deferred: a pass left a due slot for the next)."},
			[]string{"tenant", "schedule", "outcome"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_federation_leader",
			Help: "1 while this server leads the federation (and fires the schedules)."}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(s.fires, s.leader)
	}
	return s
}

// Leading reports whether this server fires the schedules now.
func (s *Scheduler) Leading() bool { return s.leading.Load() }

func (s *Scheduler) now() time.Time { return s.cfg.Now() }

// Run campaigns in the federation election until ctx ends, firing the
// schedules during each term. It returns nil when ctx is cancelled.
func (s *Scheduler) Run(ctx context.Context) error {
	el := lease.NewElector(s.store.Client(), s.cfg.Prefix+"elect/federation", s.cfg.ID,
		lease.WithTTL(s.cfg.SessionTTL), lease.WithCallTimeout(s.cfg.CallTimeout), lease.WithLogger(s.cfg.Logger))
	err := el.Run(ctx, s.lead)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// term is one term as federation leader.
type term struct {
	l       *lease.Leadership
	loaded  map[string]State  // states as read when the term began, by state key
	entries map[string]*entry // by definition key
	warned  map[string]bool   // unreadable definitions already logged
	// listedAt is when entries were last read from etcd (wall clock).
	listedAt time.Time
	turn     int                // rotates the tenant served first
	buckets  map[string]*bucket // fires per tenant (Limits)
	// backfillAt is when the backfills were last advanced (wall clock).
	backfillAt time.Time
}

// bucket returns tenant's fire bucket.
func (t *term) bucket(tenant string) *bucket {
	b := t.buckets[tenant]
	if b == nil {
		b = &bucket{}
		t.buckets[tenant] = b
	}
	return b
}

// lookup finds tenant's schedule name among the term's entries (nil: none).
func (t *term) lookup(st defs.Store, tenant, name string) *entry {
	if e := t.entries[st.DefKey(tenant, name)]; e != nil {
		return e
	}
	if e := t.entries[st.LegacyKey(name)]; e != nil && e.Tenant() == tenant {
		return e
	}
	return nil
}

// entry is the leader's copy of one schedule. Its state is read from etcd
// once per term and then kept here: only this term writes it.
type entry struct {
	stored
	comp    slots.Clock
	st      State
	lastErr string    // logged once until it changes
	dueAt   time.Time // its first slot not handled yet (pass)
}

// lead is one term: it fires due slots, then sleeps until the next slot of
// any schedule, at most a second (new schedules, retries).
func (s *Scheduler) lead(ctx context.Context, l *lease.Leadership) {
	s.leading.Store(true)
	s.leader.Set(1)
	s.log.Info("leading the federation: firing schedules", "token", l.Token(), "id", s.cfg.ID)
	defer func() {
		s.leading.Store(false)
		s.leader.Set(0)
		s.log.Info("stopped leading the federation", "token", l.Token(), "reason", l.Err())
	}()
	t := &term{l: l, entries: map[string]*entry{}, warned: map[string]bool{}, buckets: map[string]*bucket{}}
	for t.loaded == nil {
		st, err := s.store.States(ctx)
		if err == nil {
			t.loaded = st
			break
		}
		s.log.Warn("schedules: cannot read their states; retrying", "err", err)
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return
		}
	}
	for ctx.Err() == nil && l.Err() == nil {
		wait := s.pass(ctx, t)
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

// listEvery is how often a term reads the definitions again: a schedule
// created, paused or deleted is seen within about this.
const listEvery = 500 * time.Millisecond

// refresh reads the definitions again when the term's copy is older than
// listEvery, keeping each entry's state.
func (s *Scheduler) refresh(ctx context.Context, t *term) error {
	if !t.listedAt.IsZero() && time.Since(t.listedAt) < listEvery {
		return nil
	}
	defs, bad, err := s.store.List(ctx)
	if err != nil {
		return err
	}
	t.listedAt = time.Now()
	for _, k := range bad {
		if !t.warned[k] {
			t.warned[k] = true
			s.log.Error("schedules: unreadable definition ignored", "key", k)
		}
	}
	seen := make(map[string]bool, len(defs))
	for _, sd := range defs {
		key := sd.Key
		seen[key] = true
		e := t.entries[key]
		if e == nil || e.Rev != sd.Rev {
			comp, err := slots.Compile(sd.Def.Cron, sd.Def.Timezone)
			if err != nil {
				if !t.warned[key] {
					t.warned[key] = true
					s.log.Error("schedules: definition does not compile; ignored", "schedule", sd.Def.Name, "tenant", sd.Tenant(), "err", err)
				}
				continue
			}
			e = &entry{stored: sd, comp: comp}
			if st, ok := t.loaded[s.store.StateKey(key)]; ok && st.DefRev == sd.Rev {
				e.st = st
			}
			t.entries[key] = e
		} else if e.ModRev != sd.ModRev {
			e.Def, e.ModRev = sd.Def, sd.ModRev // paused or resumed
		}
	}
	for key := range t.entries {
		if !seen[key] {
			delete(t.entries, key)
		}
	}
	return nil
}

// pass fires the schedules due now, fairly across tenants, and returns how
// long to sleep. Tenants take turns, one schedule each per round, within
// their fires per second (Limits): one tenant's thousand due schedules
// delay another's by one schedule a round, not by a thousand.
func (s *Scheduler) pass(ctx context.Context, t *term) time.Duration {
	if err := s.refresh(ctx, t); err != nil {
		s.log.Warn("schedules: cannot list definitions", "err", err)
		return time.Second
	}
	now := s.now()
	wait := time.Second
	var due []*entry
	for _, e := range t.entries {
		if e.Def.Paused {
			continue
		}
		after := e.st.LastSlot
		if after.IsZero() {
			after = e.Def.CreatedAt
		}
		e.dueAt = e.comp.Next(after)
		switch {
		case e.dueAt.IsZero():
		case e.dueAt.After(now):
			wait = min(wait, e.dueAt.Sub(now))
		default:
			due = append(due, e)
		}
	}
	q := newDueQueues(due, t.turn)
	t.turn++
	began := time.Now()
	for !q.empty() {
		for _, tenant := range q.tenants {
			e := q.pop(tenant)
			if e == nil {
				continue
			}
			lim := s.limits(tenant)
			b := t.bucket(tenant)
			tokens := b.refill(time.Now(), lim)
			if tokens < 1 {
				q.drop(tenant)
				wait = min(wait, b.untilOne(lim))
				continue
			}
			next, fired, err := s.advance(ctx, t, e, int(tokens))
			b.tokens -= float64(fired)
			switch {
			case errors.Is(err, errNotLeader):
				s.log.Warn("schedules: the election key is no longer ours; stopping", "token", t.l.Token())
				t.l.Lost(err)
				return 0
			case errors.Is(err, errGone):
				delete(t.entries, e.Key)
				continue
			case err != nil:
				if ctx.Err() != nil {
					return 0
				}
				s.fires.WithLabelValues(tenant, e.Def.Name, OutcomeDeferred).Inc()
				if msg := err.Error(); msg != e.lastErr {
					e.lastErr = msg
					s.log.Warn("schedule: slot not fired; retrying", "schedule", e.Def.Name, "tenant", tenant, "home_region", e.Def.HomeRegion, "err", err)
				}
				continue
			}
			e.lastErr = ""
			if !next.IsZero() {
				wait = min(wait, next.Sub(s.now()))
			}
		}
		if !q.empty() && time.Since(began) > maxPass {
			return 0 // the next pass starts at once, with what is due then
		}
	}
	if err := s.stepBackfills(ctx, t); errors.Is(err, errNotLeader) {
		t.l.Lost(err)
		return 0
	}
	return max(min(wait, backfillEvery), 5*time.Millisecond)
}

// advance fires (or skips) up to limit of a schedule's due slots,
// recording each, and returns its next slot and how many slots it handled
// (the tenant's fires). Order per slot: enqueue, then record; a slot
// enqueued but not recorded is enqueued again by the next pass or leader,
// which the store refuses (same id). Slots beyond limit stay due.
func (s *Scheduler) advance(ctx context.Context, t *term, e *entry, limit int) (next time.Time, handled int, err error) {
	l := t.l
	now := s.now()
	after := e.st.LastSlot
	if after.IsZero() {
		after = e.Def.CreatedAt
	}
	p := planSlots(e.comp, e.Def, after, now, s.cfg.Tolerance)
	name, tenant := e.Def.Name, e.Tenant()
	if !p.skipTo.IsZero() {
		st := e.st
		st.LastSlot, st.LastOutcome = p.skipTo, OutcomeMisfireSkipped
		if err := s.record(ctx, l, e, st); err != nil {
			return time.Time{}, handled, err
		}
		s.fires.WithLabelValues(tenant, name, OutcomeMisfireSkipped).Add(float64(p.skipped))
		s.log.Info("schedule: missed slots skipped", "schedule", name, "tenant", tenant, "slots", p.skipped, "through", p.skipTo,
			"misfire", e.Def.Misfire, "reason", "MISFIRE_SKIPPED")
	}
	if len(p.fire) > limit {
		p.fire = p.fire[:max(limit, 0)]
	}
	for i, slot := range p.fire {
		handled++
		outcome, id, err := s.fire(ctx, t, e, slot)
		if err != nil {
			return time.Time{}, handled, err
		}
		st := e.st
		st.LastSlot, st.LastOutcome = slot, outcome
		if id != "" {
			fired := slot
			st.LastFiredSlot, st.LastTaskID = &fired, id
		}
		if err := s.record(ctx, l, e, st); err != nil {
			return time.Time{}, handled, err
		}
		s.fires.WithLabelValues(tenant, name, outcome).Inc()
		if i == 0 && p.skipped > 0 && p.skipTo.IsZero() {
			s.fires.WithLabelValues(tenant, name, OutcomeMisfireSkipped).Add(float64(p.skipped))
			s.log.Info("schedule: missed slots skipped", "schedule", name, "tenant", tenant, "slots", p.skipped, "before", slot,
				"misfire", e.Def.Misfire, "reason", "MISFIRE_SKIPPED")
		}
		attrs := []any{"schedule", name, "tenant", tenant, "slot", slot, "outcome", outcome, "reason", strings.ToUpper(outcome),
			"late", now.Sub(slot).Round(time.Millisecond)}
		if id != "" {
			attrs = append(attrs, "id", id, "trace_id", traceOf(e.Def.Task, id), "home_region", e.Def.HomeRegion)
		}
		s.log.Info("schedule slot", attrs...)
	}
	return e.comp.Next(now), handled, nil
}

func traceOf(sp *task.Spec, id string) string {
	// A DAG schedule's (sp nil) trace is its run id's.
	if sp != nil && sp.TraceID != "" {
		return sp.TraceID
	}
	return task.TraceIDFor(id)
}

// record writes the entry's new state under the term's guard.
func (s *Scheduler) record(ctx context.Context, l *lease.Leadership, e *entry, st State) error {
	st.DefRev, st.UpdatedAt, st.Leader = e.Rev, s.now().UTC(), l.Token()
	if err := s.store.Advance(ctx, l, e.Key, e.Rev, st); err != nil {
		return err
	}
	e.st = st
	return nil
}

// fire applies the overlap policy and enqueues the slot's task. It returns
// the outcome and, when the slot has a task, its id; an error leaves the
// slot for the next pass.
func (s *Scheduler) fire(ctx context.Context, t *term, e *entry, slot time.Time) (outcome, id string, err error) {
	d := e.Def
	if d.Overlap != OverlapAllow && e.st.LastFiredSlot != nil {
		prev := e.st.LastTaskID
		if prev == "" {
			prev = e.runID(*e.st.LastFiredSlot)
		}
		busy, err := s.unfinished(ctx, e, prev)
		if err != nil {
			return "", "", err
		}
		if busy && d.Overlap == OverlapForbid {
			s.log.Info("schedule: previous run unfinished; slot skipped", "schedule", d.Name, "slot", slot,
				"previous", prev, "reason", "OVERLAP_FORBIDDEN")
			return OutcomeSkippedOverlap, "", nil
		}
		if busy {
			// A run that finished meanwhile is fine (CancelTask's contract).
			if err := s.cancelRun(ctx, e, prev, "schedule:"+d.Name); err != nil {
				return "", "", err
			}
			s.log.Info("schedule: previous run replaced", "schedule", d.Name, "slot", slot, "previous", prev,
				"reason", "OVERLAP_REPLACED")
		}
	}
	id = e.runID(slot)
	runAt := slot.Add(jitterOffset(d.Name, slot, time.Duration(d.Jitter))).UTC()
	created, refused, err := s.start(ctx, t, e, slot, id, runAt, nil)
	switch {
	case err != nil:
		return "", "", err
	case budgetRefusal(refused):
		s.log.Warn("schedule: its tenant is past its monthly budget; slot given up", "schedule", d.Name, "slot", slot,
			"id", id, "tenant", tenantOf(d), "err", refused, "reason", "BUDGET_EXCEEDED")
		return OutcomeBudgetExceeded, "", nil
	case refused != nil:
		s.log.Error("schedule: the home region refuses the run; slot given up", "schedule", d.Name, "slot", slot,
			"id", id, "home_region", d.HomeRegion, "err", refused, "reason", "REJECTED")
		return OutcomeRejected, "", nil
	case created:
		return OutcomeFired, id, nil
	}
	return OutcomeAlreadyFired, id, nil
}

// budgetRefusal reports whether err is a refusal by the tenant's budget
// (Enqueuer.Enqueue).
func budgetRefusal(err error) bool {
	var b interface{ BudgetExceeded() bool }
	return errors.As(err, &b) && b.BudgetExceeded()
}

// sleepCtx waits for d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

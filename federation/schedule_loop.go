package federation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/queue"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// SchedulerConfig configures the schedules of one server. Zero values take
// the defaults named.
type SchedulerConfig struct {
	Prefix     string        // etcd key prefix (default "/ax/")
	ID         string        // this server's value in the federation election
	SessionTTL time.Duration // of the federation election (default lease.DefaultSessionTTL)
	// Tolerance is how late a slot may be reached and still fire as on time
	// (default 2s); older slots are missed and the misfire policy decides.
	Tolerance time.Duration
	// CallTimeout bounds each etcd request and each call to another region
	// (default 5s).
	CallTimeout time.Duration
	Registerer  prometheus.Registerer // nil: metrics are not registered
	Logger      *slog.Logger
	Now         func() time.Time // the clock slots are compared with (tests inject one)
}

// Scheduler serves a server's schedules: the API reads and writes
// definitions through it, and Run campaigns in the federation election
// (<prefix>elect/federation) and, while it leads, fires the schedules.
type Scheduler struct {
	n       *Node
	store   scheduleStore
	cfg     SchedulerConfig
	log     *slog.Logger
	fires   *prometheus.CounterVec
	leader  prometheus.Gauge
	leading atomic.Bool
}

// Outcomes of a slot (the outcome label of ax_schedule_fires_total).
const (
	outcomeFired          = "fired"           // its task was enqueued
	outcomeAlreadyFired   = "already_fired"   // its task existed (an earlier leader enqueued it)
	outcomeSkippedOverlap = "skipped_overlap" // overlap forbid: the previous run had not finished
	outcomeMisfireSkipped = "misfire_skipped" // missed, and the misfire policy gave it up
	outcomeRejected       = "rejected"        // the home region refused the task for good (invalid there)
)

// schedulers attaches a Scheduler to its Node, so the API (built from the
// Node alone) finds it.
var schedulers sync.Map // *Node → *Scheduler

// NewScheduler prepares the schedules of the server of n, kept in the
// global etcd c, and attaches them to n's API.
func NewScheduler(n *Node, c *clientv3.Client, cfg SchedulerConfig) *Scheduler {
	if cfg.Prefix == "" {
		cfg.Prefix = "/ax/"
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
		cfg.Logger = n.log
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ID == "" {
		cfg.ID = n.cfg.Region
	}
	s := &Scheduler{
		n: n, cfg: cfg, log: cfg.Logger.With("component", "schedules"),
		store: scheduleStore{c: c, prefix: cfg.Prefix, timeout: cfg.CallTimeout},
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_schedule_fires_total",
			Help: "Slots of cron schedules handled by the federation leader, by outcome (fired, already_fired, skipped_overlap, misfire_skipped, rejected)."},
			[]string{"schedule", "outcome"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_federation_leader",
			Help: "1 while this server leads the federation (and fires the schedules)."}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(s.fires, s.leader)
	}
	schedulers.Store(n, s)
	return s
}

// scheduler is the Scheduler attached to n, or nil.
func (n *Node) scheduler() *Scheduler {
	if v, ok := schedulers.Load(n); ok {
		return v.(*Scheduler)
	}
	return nil
}

// Leading reports whether this server fires the schedules now.
func (s *Scheduler) Leading() bool { return s.leading.Load() }

func (s *Scheduler) now() time.Time { return s.cfg.Now() }

// Run campaigns in the federation election until ctx ends, firing the
// schedules during each term. It returns nil when ctx is cancelled.
func (s *Scheduler) Run(ctx context.Context) error {
	el := lease.NewElector(s.store.c, s.cfg.Prefix+"elect/federation", s.cfg.ID,
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
	loaded  map[string]scheduleState // states as read when the term began
	entries map[string]*scheduleEntry
	warned  map[string]bool // unreadable definitions already logged
}

// scheduleEntry is the leader's copy of one schedule. Its state is read
// from etcd once per term and then kept here: only this term writes it.
type scheduleEntry struct {
	def     *Schedule
	rev     int64 // definition's create revision (its generation)
	modRev  int64
	comp    compiled
	st      scheduleState
	lastErr string // logged once until it changes
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
	t := &term{l: l, entries: map[string]*scheduleEntry{}, warned: map[string]bool{}}
	for t.loaded == nil {
		st, err := s.store.states(ctx)
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

// pass handles every schedule's due slots once and returns how long to
// sleep.
func (s *Scheduler) pass(ctx context.Context, t *term) time.Duration {
	defs, bad, err := s.store.list(ctx)
	if err != nil {
		s.log.Warn("schedules: cannot list definitions", "err", err)
		return time.Second
	}
	for _, k := range bad {
		if !t.warned[k] {
			t.warned[k] = true
			s.log.Error("schedules: unreadable definition ignored", "key", k)
		}
	}
	wait := time.Second
	seen := make(map[string]bool, len(defs))
	for _, sd := range defs {
		name := sd.def.Name
		seen[name] = true
		e := t.entries[name]
		if e == nil || e.rev != sd.rev {
			comp, err := compileSchedule(sd.def.Cron, sd.def.Timezone)
			if err != nil {
				if k := s.store.defKey(name); !t.warned[k] {
					t.warned[k] = true
					s.log.Error("schedules: definition does not compile; ignored", "schedule", name, "err", err)
				}
				continue
			}
			e = &scheduleEntry{def: sd.def, rev: sd.rev, modRev: sd.modRev, comp: comp}
			if st, ok := t.loaded[name]; ok && st.DefRev == sd.rev {
				e.st = st
			}
			t.entries[name] = e
		} else if e.modRev != sd.modRev {
			e.def, e.modRev = sd.def, sd.modRev // paused or resumed
		}
		if e.def.Paused {
			continue
		}
		next, err := s.advance(ctx, t.l, e)
		switch {
		case errors.Is(err, errNotFederationLeader):
			s.log.Warn("schedules: the election key is no longer ours; stopping", "token", t.l.Token())
			t.l.Lost(err)
			return 0
		case errors.Is(err, errScheduleGone):
			delete(t.entries, name)
			continue
		case err != nil:
			if ctx.Err() != nil {
				return 0
			}
			if msg := err.Error(); msg != e.lastErr {
				e.lastErr = msg
				s.log.Warn("schedule: slot not fired; retrying", "schedule", name, "home_region", e.def.HomeRegion, "err", err)
			}
			continue
		}
		e.lastErr = ""
		if !next.IsZero() {
			wait = min(wait, next.Sub(s.now()))
		}
	}
	for name := range t.entries {
		if !seen[name] {
			delete(t.entries, name)
		}
	}
	return max(wait, 5*time.Millisecond)
}

// advance fires (or skips) a schedule's due slots, recording each, and
// returns its next slot. Order per slot: enqueue, then record; a slot
// enqueued but not recorded is enqueued again by the next pass or leader,
// which the store refuses (same id).
func (s *Scheduler) advance(ctx context.Context, l *lease.Leadership, e *scheduleEntry) (time.Time, error) {
	now := s.now()
	after := e.st.LastSlot
	if after.IsZero() {
		after = e.def.CreatedAt
	}
	p := planSlots(e.comp, e.def, after, now, s.cfg.Tolerance)
	name := e.def.Name
	if !p.skipTo.IsZero() {
		st := e.st
		st.LastSlot, st.LastOutcome = p.skipTo, outcomeMisfireSkipped
		if err := s.record(ctx, l, e, st); err != nil {
			return time.Time{}, err
		}
		s.fires.WithLabelValues(name, outcomeMisfireSkipped).Add(float64(p.skipped))
		s.log.Info("schedule: missed slots skipped", "schedule", name, "slots", p.skipped, "through", p.skipTo,
			"misfire", e.def.Misfire, "reason", "MISFIRE_SKIPPED")
	}
	for i, slot := range p.fire {
		outcome, id, err := s.fire(ctx, e, slot)
		if err != nil {
			return time.Time{}, err
		}
		st := e.st
		st.LastSlot, st.LastOutcome = slot, outcome
		if id != "" {
			fired := slot
			st.LastFiredSlot, st.LastTaskID = &fired, id
		}
		if err := s.record(ctx, l, e, st); err != nil {
			return time.Time{}, err
		}
		s.fires.WithLabelValues(name, outcome).Inc()
		if i == 0 && p.skipped > 0 && p.skipTo.IsZero() {
			s.fires.WithLabelValues(name, outcomeMisfireSkipped).Add(float64(p.skipped))
			s.log.Info("schedule: missed slots skipped", "schedule", name, "slots", p.skipped, "before", slot,
				"misfire", e.def.Misfire, "reason", "MISFIRE_SKIPPED")
		}
		attrs := []any{"schedule", name, "slot", slot, "outcome", outcome, "reason", strings.ToUpper(outcome),
			"late", now.Sub(slot).Round(time.Millisecond)}
		if id != "" {
			attrs = append(attrs, "id", id, "trace_id", traceOf(e.def.Task, id), "home_region", e.def.HomeRegion)
		}
		s.log.Info("schedule slot", attrs...)
	}
	return e.comp.next(now), nil
}

func traceOf(sp *queue.Spec, id string) string {
	if sp != nil && sp.TraceID != "" {
		return sp.TraceID
	}
	return queue.TraceIDFor(id)
}

// record writes the entry's new state under the term's guard.
func (s *Scheduler) record(ctx context.Context, l *lease.Leadership, e *scheduleEntry, st scheduleState) error {
	st.DefRev, st.UpdatedAt, st.Leader = e.rev, s.now().UTC(), l.Token()
	if err := s.store.advance(ctx, l, e.def.Name, e.rev, st); err != nil {
		return err
	}
	e.st = st
	return nil
}

// fire applies the overlap policy and enqueues the slot's task. It returns
// the outcome and, when the slot has a task, its id; an error leaves the
// slot for the next pass.
func (s *Scheduler) fire(ctx context.Context, e *scheduleEntry, slot time.Time) (outcome, id string, err error) {
	d := e.def
	if d.Overlap != OverlapAllow && e.st.LastFiredSlot != nil {
		prev := ScheduleTaskID(d.Name, *e.st.LastFiredSlot, d.HomeRegion)
		busy, err := s.unfinished(ctx, prev)
		if err != nil {
			return "", "", err
		}
		if busy && d.Overlap == OverlapForbid {
			s.log.Info("schedule: previous run unfinished; slot skipped", "schedule", d.Name, "slot", slot,
				"previous", prev, "reason", "OVERLAP_FORBIDDEN")
			return outcomeSkippedOverlap, "", nil
		}
		if busy {
			if err := s.cancel(ctx, d.Name, prev); err != nil {
				return "", "", err
			}
			s.log.Info("schedule: previous run replaced", "schedule", d.Name, "slot", slot, "previous", prev,
				"reason", "OVERLAP_REPLACED")
		}
	}
	id = ScheduleTaskID(d.Name, slot, d.HomeRegion)
	created, err := s.enqueue(ctx, d, id, slot)
	switch {
	case refusedForGood(err):
		s.log.Error("schedule: the home region refuses the task; slot given up", "schedule", d.Name, "slot", slot,
			"id", id, "home_region", d.HomeRegion, "err", err, "reason", "REJECTED")
		return outcomeRejected, "", nil
	case err != nil:
		return "", "", err
	case created:
		return outcomeFired, id, nil
	}
	return outcomeAlreadyFired, id, nil
}

// unfinished reports whether the task id exists and is not terminal. A
// task no region knows (expired after its retention) has finished.
func (s *Scheduler) unfinished(ctx context.Context, id string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	t, err := s.n.Get(cctx, id, 0)
	switch {
	case errors.Is(err, queue.ErrNotFound), isPeerNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return !t.State.Terminal(), nil
}

// cancel asks for the previous run to stop (overlap replace); a run that
// finished meanwhile is fine.
func (s *Scheduler) cancel(ctx context.Context, name, id string) error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	_, err := s.n.Act(cctx, OpCancel, id, 0, "schedule:"+name, 0)
	var te *queue.TransitionError
	var pe *PeerError
	switch {
	case err == nil, errors.As(err, &te), errors.Is(err, queue.ErrNotFound):
		return nil
	case errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusConflict):
		return nil
	}
	return err
}

// enqueue submits a slot's task into the schedule's home region: into the
// local store when that is this server's region, else through the home
// region's internal endpoint. created is false when the id existed.
func (s *Scheduler) enqueue(ctx context.Context, d *Schedule, id string, slot time.Time) (bool, error) {
	sp := *d.Task
	runAt := slot.Add(jitterOffset(d.Name, slot, time.Duration(d.Jitter))).UTC()
	sp.RunAt = &runAt
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if d.HomeRegion == s.n.cfg.Region {
		created, _, err := s.n.enqueueFixed(cctx, id, &sp, s.now())
		return created, err
	}
	api, err := s.n.peerAPI(d.HomeRegion)
	if err != nil {
		return false, err
	}
	spec, err := json.Marshal(&sp)
	if err != nil {
		return false, err
	}
	s.n.metrics.forwarded.WithLabelValues(s.n.cfg.Region, d.HomeRegion).Inc()
	var resp scheduleEnqueueResponse
	if _, err := s.n.call(cctx, api, http.MethodPost, "/v1/internal/enqueue", scheduleEnqueue{ID: id, Spec: spec}, &resp); err != nil {
		return false, err
	}
	return resp.Created, nil
}

// refusedForGood: the task itself is invalid in its home region; sending it
// again cannot help.
func refusedForGood(err error) bool {
	var fe *queue.FieldError
	var pe *PeerError
	switch {
	case errors.As(err, &fe):
		return true
	case errors.As(err, &pe):
		return pe.Status == http.StatusBadRequest || pe.Status == http.StatusRequestEntityTooLarge ||
			pe.Status == http.StatusUnprocessableEntity
	}
	return false
}

// enqueueFixed accepts a task under a fixed id in this region, unplaced (the
// region leader places it when due). created is false when a task with the
// id exists already.
func (n *Node) enqueueFixed(ctx context.Context, id string, sp *queue.Spec, now time.Time) (bool, queue.State, error) {
	if err := sp.Normalize(n.cfg.Defaults, now); err != nil {
		return false, "", err
	}
	res, err := n.store.Submit(ctx, queue.NewTask{ID: id, Spec: sp})
	if err != nil {
		return false, "", err
	}
	r := res[0]
	switch {
	case errors.Is(r.Err, queue.ErrExists):
		return false, r.State, nil
	case r.Err != nil:
		return false, "", r.Err
	}
	n.metrics.submitted.WithLabelValues(n.cfg.Region, sp.Tenant, sp.Type).Inc()
	if n.cell != nil {
		n.cell.Wake()
	}
	return true, r.State, nil
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

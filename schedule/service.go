package schedule

import (
	"context"
	"errors"
	"fmt"
	"github.com/ax-sched/ax/schedule/slots"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/schedule/depend"
)

// The definitions as the API reads and writes them. Each tenant names its
// schedules in a namespace of its own. tenant, where given, is the
// tenant whose schedules the caller addresses: "" is every tenant (a
// caller of every tenant: a name two tenants use is then a conflict naming
// them), another value only that tenant's schedules (others are
// ErrNotFound, so their names do not leak). Errors are *task.FieldError,
// ErrExists, ErrNotFound, another *apiv1.Error, or the global etcd failing
// (*apiv1.Error unavailable, retry after a second).

// Create stores a definition Validate built, its task's tenant settled by
// the caller ("" is "default"), as created now by by.
func (s *Scheduler) Create(ctx context.Context, d *apiv1.Schedule, by string) (*apiv1.ScheduleStatus, error) {
	now := s.now()
	tenant := tenantOf(d)
	switch {
	case d.DAG != nil:
		dr := *d.DAG
		dr.Tenant = tenant
		if err := s.checkDAG(&dr); err != nil {
			return nil, err
		}
		d.DAG = &dr
	default:
		if err := s.checkTask(d.Task, now); err != nil {
			return nil, err
		}
		if d.Task.Tenant == "" {
			t := *d.Task
			t.Tenant = tenant
			d.Task = &t
		}
	}
	d.CreatedAt, d.CreatedBy = now.UTC(), by
	maxSchedules := s.limits(tenant).MaxSchedules
	// One create at a time per server: creates of one tenant fail each
	// other's count check (store.create), so concurrent ones would retry
	// in turn; only other servers' creates can still interleave.
	s.createMu.Lock()
	defer s.createMu.Unlock()
	for attempt := 0; ; attempt++ {
		defs, _, listRev, err := s.store.ListAt(ctx)
		if err != nil {
			return nil, unavailable(err)
		}
		var legacyRev int64
		taken := make(map[uint64]bool, len(defs))
		mine := 0
		for _, o := range defs {
			switch {
			case o.Tenant() == tenant && o.Def.Name == d.Name:
				return nil, ErrExists
			case o.Legacy && o.Def.Name == d.Name:
				legacyRev = o.Rev // another tenant's, in the old layout
			}
			if o.Tenant() == tenant {
				mine++
			}
			taken[o.IDSeq()] = true
		}
		if err := depend.CheckUpstreams(d, tenantDefs(defs, tenant)); err != nil {
			return nil, err
		}
		if mine >= maxSchedules {
			return nil, &apiv1.Error{Code: apiv1.CodeQuotaExceeded, Field: "max_schedules",
				Message: fmt.Sprintf("tenant %s has %d schedules, its max_schedules: delete one first", tenant, mine)}
		}
		// Task ids are one space across tenants: the new schedule's never
		// meet another's, and nothing here depends on another tenant's names.
		seq, err := newSeq(taken)
		if err != nil {
			return nil, unavailable(err)
		}
		rev, exists, err := s.store.Create(ctx, d, seq, legacyRev, listRev)
		switch {
		case err != nil:
			return nil, unavailable(err)
		case exists:
			return nil, ErrExists
		case rev == 0 && attempt < 16:
			// Another write of the tenant's schedules (or the legacy name)
			// meanwhile, on another server: read again after a moment.
			if !sleepCtx(ctx, time.Duration(1+rand.IntN(50))*time.Millisecond) {
				return nil, ctx.Err()
			}
			continue
		case rev == 0:
			return nil, unavailable(fmt.Errorf("schedule %s: create: concurrent writers", d.Name))
		}
		st := s.status(stored{Def: d, Seq: &seq, Key: s.store.DefKey(tenant, d.Name), Rev: rev}, State{}, now)
		return &st, nil
	}
}

// tenantDefs is tenant's schedules among defs, by name.
func tenantDefs(defs []stored, tenant string) map[string]*apiv1.Schedule {
	out := map[string]*apiv1.Schedule{}
	for _, o := range defs {
		if o.Tenant() == tenant {
			out[o.Def.Name] = o.Def
		}
	}
	return out
}

// List returns the schedules of tenant ("" every tenant's), sorted by
// name, then tenant.
func (s *Scheduler) List(ctx context.Context, tenant string) ([]apiv1.ScheduleStatus, error) {
	defs, _, err := s.store.List(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	states, err := s.store.States(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	now := s.now()
	out := []apiv1.ScheduleStatus{}
	for _, sd := range defs {
		if tenant == "" || tenant == sd.Tenant() {
			out = append(out, s.status(sd, states[s.store.StateKey(sd.Key)], now))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return tenantOf(&out[i].Schedule) < tenantOf(&out[j].Schedule)
	})
	return out, nil
}

// Get returns one schedule.
func (s *Scheduler) Get(ctx context.Context, name, tenant string) (*apiv1.ScheduleStatus, error) {
	sd, err := s.find(ctx, name, tenant)
	if err != nil {
		return nil, err
	}
	return s.withState(ctx, sd)
}

// Delete removes a schedule and its state.
func (s *Scheduler) Delete(ctx context.Context, name, tenant string) error {
	sd, err := s.find(ctx, name, tenant)
	if err != nil {
		return err
	}
	return unavailable(s.store.Remove(ctx, sd))
}

// SetPaused pauses or resumes a schedule. A resumed schedule's missed
// slots go through its misfire policy.
func (s *Scheduler) SetPaused(ctx context.Context, name, tenant string, paused bool) (*apiv1.ScheduleStatus, error) {
	sd, err := s.find(ctx, name, tenant)
	if err != nil {
		return nil, err
	}
	sd, err = s.store.Update(ctx, sd, func(d *apiv1.Schedule) { d.Paused = paused })
	if err != nil {
		return nil, unavailable(err)
	}
	return s.withState(ctx, sd)
}

// find reads tenant's schedule name; with tenant "" the one schedule of
// any tenant so named.
func (s *Scheduler) find(ctx context.Context, name, tenant string) (stored, error) {
	if !nameRe.MatchString(name) {
		return stored{}, ErrNotFound
	}
	if tenant != "" {
		sd, err := s.store.Get(ctx, tenant, name)
		return sd, unavailable(err)
	}
	defs, _, err := s.store.List(ctx)
	if err != nil {
		return stored{}, unavailable(err)
	}
	var found []stored
	var tenants []string
	for _, sd := range defs {
		if sd.Def.Name == name {
			found = append(found, sd)
			tenants = append(tenants, sd.Tenant())
		}
	}
	switch len(found) {
	case 0:
		return stored{}, ErrNotFound
	case 1:
		return found[0], nil
	}
	sort.Strings(tenants)
	return stored{}, &apiv1.Error{Code: apiv1.CodeConflict, Field: "tenant",
		Message: fmt.Sprintf("tenants %s each have a schedule named %s: name the tenant", strings.Join(tenants, ", "), name)}
}

func (s *Scheduler) withState(ctx context.Context, sd stored) (*apiv1.ScheduleStatus, error) {
	st, _, err := s.store.State(ctx, sd)
	if err != nil {
		return nil, unavailable(err)
	}
	out := s.status(sd, st, s.now())
	return &out, nil
}

// unavailable passes the store's own errors (ErrExists, ErrNotFound) and a
// cancelled request through; anything else from it is the global etcd
// failing.
func unavailable(err error) error {
	var ae *apiv1.Error
	if err == nil || errors.As(err, &ae) || errors.Is(err, context.Canceled) {
		return err
	}
	return &apiv1.Error{Code: apiv1.CodeUnavailable, Message: "global etcd: " + err.Error(),
		RetryAfterSeconds: 1}
}

// status is a schedule as the API shows it: its definition, what the
// leader last did with it (when the state belongs to this definition), and
// its next slot. Times are in the schedule's zone.
func (s *Scheduler) status(sd stored, st State, now time.Time) apiv1.ScheduleStatus {
	out := apiv1.ScheduleStatus{Schedule: *sd.Def}
	comp, err := slots.Compile(sd.Def.Cron, sd.Def.Timezone)
	if err != nil {
		return out
	}
	if st.DefRev == sd.Rev && !st.LastSlot.IsZero() {
		ls := st.LastSlot.In(comp.Loc())
		out.LastSlot, out.LastOutcome = &ls, st.LastOutcome
		if st.LastFiredSlot != nil {
			lf := st.LastFiredSlot.In(comp.Loc())
			out.LastFiredSlot, out.LastTaskID = &lf, st.LastTaskID
			p := (&entry{comp: comp}).periodOf(*st.LastFiredSlot)
			out.LastPeriod = &p
		}
	}
	if !sd.Def.Paused {
		if next := comp.Next(now); !next.IsZero() {
			out.NextSlot = &next
		}
	}
	return out
}

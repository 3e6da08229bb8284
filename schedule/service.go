package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// The definitions as the API reads and writes them. tenant, where given,
// is the caller's: "" sees every schedule, another value only the
// schedules whose task is that tenant's (others are ErrNotFound, so their
// names do not leak). Errors are *task.FieldError, ErrExists, ErrNotFound,
// another *apiv1.Error, or the global etcd failing (*apiv1.Error
// unavailable, retry after a second).

// Create stores a definition Validate built, its task's tenant settled by
// the caller, as created now by by.
func (s *Scheduler) Create(ctx context.Context, d *apiv1.Schedule, by string) (*apiv1.ScheduleStatus, error) {
	now := s.now()
	if err := s.checkTask(d.Task, now); err != nil {
		return nil, err
	}
	d.CreatedAt, d.CreatedBy = now.UTC(), by
	defs, _, err := s.store.list(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	for _, o := range defs {
		if o.def.Name != d.Name && nameSeq(o.def.Name) == nameSeq(d.Name) {
			return nil, &apiv1.Error{Code: apiv1.CodeConflict, Field: "name",
				Message: fmt.Sprintf("this name's task ids would collide with schedule %q's; choose another name", o.def.Name)}
		}
	}
	rev, err := s.store.create(ctx, d)
	if err != nil {
		return nil, unavailable(err)
	}
	st := s.status(stored{def: d, rev: rev}, State{}, now)
	return &st, nil
}

// List returns the schedules tenant sees, sorted by name.
func (s *Scheduler) List(ctx context.Context, tenant string) ([]apiv1.ScheduleStatus, error) {
	defs, _, err := s.store.list(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	states, err := s.store.states(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	now := s.now()
	out := []apiv1.ScheduleStatus{}
	for _, sd := range defs {
		if sees(tenant, sd) {
			out = append(out, s.status(sd, states[sd.def.Name], now))
		}
	}
	return out, nil
}

// Get returns one schedule.
func (s *Scheduler) Get(ctx context.Context, name, tenant string) (*apiv1.ScheduleStatus, error) {
	sd, err := s.visible(ctx, name, tenant)
	if err != nil {
		return nil, err
	}
	return s.withState(ctx, sd)
}

// Delete removes a schedule and its state.
func (s *Scheduler) Delete(ctx context.Context, name, tenant string) error {
	if _, err := s.visible(ctx, name, tenant); err != nil {
		return err
	}
	return unavailable(s.store.remove(ctx, name))
}

// SetPaused pauses or resumes a schedule. A resumed schedule's missed
// slots go through its misfire policy.
func (s *Scheduler) SetPaused(ctx context.Context, name, tenant string, paused bool) (*apiv1.ScheduleStatus, error) {
	if _, err := s.visible(ctx, name, tenant); err != nil {
		return nil, err
	}
	sd, err := s.store.update(ctx, name, func(d *apiv1.Schedule) { d.Paused = paused })
	if err != nil {
		return nil, unavailable(err)
	}
	return s.withState(ctx, sd)
}

func sees(tenant string, sd stored) bool { return tenant == "" || tenant == sd.def.Task.Tenant }

// visible reads a schedule tenant may see.
func (s *Scheduler) visible(ctx context.Context, name, tenant string) (stored, error) {
	sd, err := s.store.get(ctx, name)
	if err != nil {
		return stored{}, unavailable(err)
	}
	if !sees(tenant, sd) {
		return stored{}, ErrNotFound
	}
	return sd, nil
}

func (s *Scheduler) withState(ctx context.Context, sd stored) (*apiv1.ScheduleStatus, error) {
	st, _, err := s.store.state(ctx, sd.def.Name)
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
	out := apiv1.ScheduleStatus{Schedule: *sd.def}
	comp, err := compile(sd.def.Cron, sd.def.Timezone)
	if err != nil {
		return out
	}
	if st.DefRev == sd.rev && !st.LastSlot.IsZero() {
		ls := st.LastSlot.In(comp.loc)
		out.LastSlot, out.LastOutcome = &ls, st.LastOutcome
		if st.LastFiredSlot != nil {
			lf := st.LastFiredSlot.In(comp.loc)
			out.LastFiredSlot, out.LastTaskID = &lf, st.LastTaskID
		}
	}
	if !sd.def.Paused {
		if next := comp.next(now); !next.IsZero() {
			out.NextSlot = &next
		}
	}
	return out
}

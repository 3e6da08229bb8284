package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ax-sched/ax/federation/apiv1"
	"github.com/ax-sched/ax/queue"
)

// scheduleEnqueue is POST /v1/internal/enqueue: the federation leader hands
// a slot's task to the schedule's home region under the slot's derived id.
type scheduleEnqueue struct {
	ID   string          `json:"id"`
	Spec json.RawMessage `json:"spec"`
}

// scheduleEnqueueResponse answers it: 200 whether the id was created now
// or existed already.
type scheduleEnqueueResponse struct {
	ID      string      `json:"id"`
	State   queue.State `json:"state"`
	Created bool        `json:"created"`
}

// ScheduleDeleted answers DELETE /v1/schedules/{name}.
type ScheduleDeleted struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

// scheduleRoutes registers the schedule endpoints (DESIGN §6) and the
// internal enqueue endpoint schedules use across regions.
func (a *API) scheduleRoutes() {
	a.route("POST /v1/schedules", RoleOperator, a.createSchedule)
	a.route("GET /v1/schedules", RoleSubmitter, a.listSchedules)
	a.route("GET /v1/schedules/{name}", RoleSubmitter, a.getSchedule)
	a.route("DELETE /v1/schedules/{name}", RoleOperator, a.deleteSchedule)
	a.route("POST /v1/schedules/{name}/pause", RoleOperator, a.pauseSchedule(true))
	a.route("POST /v1/schedules/{name}/resume", RoleOperator, a.pauseSchedule(false))
	a.route("POST /v1/internal/enqueue", RoleAdmin, a.enqueueScheduled)
}

// schedules is the server's Scheduler, or a 503 when it runs none.
func (a *API) schedules() (*Scheduler, error) {
	if s := a.n.scheduler(); s != nil {
		return s, nil
	}
	return nil, &apiError{status: http.StatusServiceUnavailable, code: apiv1.CodeUnavailable,
		msg: "this server runs no scheduler: schedules need the global etcd"}
}

// scheduleError maps the schedule store's errors; anything else from it is
// the global etcd failing.
func scheduleError(err error) error {
	switch {
	case errors.Is(err, ErrScheduleExists):
		return &apiError{status: http.StatusConflict, code: apiv1.CodeConflict, msg: "a schedule with this name exists", field: "name"}
	case errors.Is(err, ErrScheduleNotFound):
		return &apiError{status: http.StatusNotFound, code: apiv1.CodeNotFound, msg: "no such schedule"}
	case errors.Is(err, context.Canceled):
		return err
	}
	return &apiError{status: http.StatusServiceUnavailable, code: apiv1.CodeUnavailable,
		msg: "global etcd: " + err.Error(), retryAfter: time.Second}
}

func (a *API) createSchedule(w http.ResponseWriter, r *http.Request, p Principal) error {
	sc, err := a.schedules()
	if err != nil {
		return err
	}
	var req scheduleRequest
	if err := decode(w, r, int64(a.cfg.MaxPayload)+(64<<10), &req); err != nil {
		return err
	}
	now := sc.now()
	d, err := a.n.validateSchedule(req, now)
	if err != nil {
		return err
	}
	if err := a.applyTenant(d.Task, p); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.field != "" {
			c := *ae
			c.field = "task." + ae.field
			return &c
		}
		return err
	}
	if err := a.n.checkTask(d.Task, now); err != nil {
		return err
	}
	d.CreatedAt, d.CreatedBy = now.UTC(), p.Name
	ctx := r.Context()
	defs, _, err := sc.store.list(ctx)
	if err != nil {
		return scheduleError(err)
	}
	for _, o := range defs {
		if o.def.Name != d.Name && scheduleSeq(o.def.Name) == scheduleSeq(d.Name) {
			return &apiError{status: http.StatusConflict, code: apiv1.CodeConflict, field: "name",
				msg: fmt.Sprintf("this name's task ids would collide with schedule %q's; choose another name", o.def.Name)}
		}
	}
	rev, err := sc.store.create(ctx, d)
	if err != nil {
		return scheduleError(err)
	}
	writeJSON(w, http.StatusCreated, sc.status(storedSchedule{def: d, rev: rev}, scheduleState{}, now))
	return nil
}

func (a *API) listSchedules(w http.ResponseWriter, r *http.Request, p Principal) error {
	sc, err := a.schedules()
	if err != nil {
		return err
	}
	defs, _, err := sc.store.list(r.Context())
	if err != nil {
		return scheduleError(err)
	}
	states, err := sc.store.states(r.Context())
	if err != nil {
		return scheduleError(err)
	}
	now := sc.now()
	out := ScheduleList{Schedules: []ScheduleStatus{}}
	for _, sd := range defs {
		if p.sees(sd.def.Task.Tenant) {
			out.Schedules = append(out.Schedules, sc.status(sd, states[sd.def.Name], now))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// visibleSchedule reads a schedule the principal may see (404 otherwise,
// so names of other tenants' schedules do not leak).
func (a *API) visibleSchedule(ctx context.Context, sc *Scheduler, p Principal, name string) (storedSchedule, error) {
	sd, err := sc.store.get(ctx, name)
	if err != nil {
		return storedSchedule{}, scheduleError(err)
	}
	if !p.sees(sd.def.Task.Tenant) {
		return storedSchedule{}, scheduleError(ErrScheduleNotFound)
	}
	return sd, nil
}

func (a *API) getSchedule(w http.ResponseWriter, r *http.Request, p Principal) error {
	sc, err := a.schedules()
	if err != nil {
		return err
	}
	sd, err := a.visibleSchedule(r.Context(), sc, p, r.PathValue("name"))
	if err != nil {
		return err
	}
	st, _, err := sc.store.state(r.Context(), sd.def.Name)
	if err != nil {
		return scheduleError(err)
	}
	writeJSON(w, http.StatusOK, sc.status(sd, st, sc.now()))
	return nil
}

func (a *API) deleteSchedule(w http.ResponseWriter, r *http.Request, p Principal) error {
	sc, err := a.schedules()
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if _, err := a.visibleSchedule(r.Context(), sc, p, name); err != nil {
		return err
	}
	if err := sc.store.remove(r.Context(), name); err != nil {
		return scheduleError(err)
	}
	writeJSON(w, http.StatusOK, ScheduleDeleted{Name: name, Deleted: true})
	return nil
}

// pauseSchedule flips paused. A resumed schedule's missed slots go through
// its misfire policy.
func (a *API) pauseSchedule(paused bool) handler {
	return func(w http.ResponseWriter, r *http.Request, p Principal) error {
		sc, err := a.schedules()
		if err != nil {
			return err
		}
		name := r.PathValue("name")
		if _, err := a.visibleSchedule(r.Context(), sc, p, name); err != nil {
			return err
		}
		sd, err := sc.store.update(r.Context(), name, func(d *Schedule) { d.Paused = paused })
		if err != nil {
			return scheduleError(err)
		}
		st, _, err := sc.store.state(r.Context(), name)
		if err != nil {
			return scheduleError(err)
		}
		writeJSON(w, http.StatusOK, sc.status(sd, st, sc.now()))
		return nil
	}
}

// enqueueScheduled is the home region's side of a firing: it accepts the
// slot's task under its derived id at most once.
func (a *API) enqueueScheduled(w http.ResponseWriter, r *http.Request, _ Principal) error {
	var req scheduleEnqueue
	if err := decode(w, r, int64(a.cfg.MaxPayload)+(64<<10), &req); err != nil {
		return err
	}
	id, err := queue.ParseID(req.ID)
	if err != nil {
		return fieldError("id", "is not a task id")
	}
	if id.Region != a.n.cfg.Region {
		return fieldError("id", fmt.Sprintf("names home region %s; this is %s", id.Region, a.n.cfg.Region))
	}
	sp, err := queue.DecodeSpec(req.Spec)
	if err != nil {
		return prefixField("spec", err)
	}
	created, st, err := a.n.enqueueFixed(r.Context(), req.ID, sp, a.n.cfg.Now())
	if err != nil {
		return prefixField("spec", err)
	}
	writeJSON(w, http.StatusOK, scheduleEnqueueResponse{ID: req.ID, State: st, Created: created})
	return nil
}

// status is a schedule as the API shows it: its definition, what the
// leader last did with it (when the state belongs to this definition), and
// its next slot. Times are in the schedule's zone.
func (s *Scheduler) status(sd storedSchedule, st scheduleState, now time.Time) ScheduleStatus {
	out := ScheduleStatus{Schedule: *sd.def}
	comp, err := compileSchedule(sd.def.Cron, sd.def.Timezone)
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

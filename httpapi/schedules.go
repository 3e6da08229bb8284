package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Schedules is what the schedule endpoints need; *schedule.Scheduler
// implements it. Each tenant names its schedules in a namespace of its
// own; tenant is the one a request addresses (scheduleTenant): "" every
// tenant, for a token of every tenant (a name two tenants use is then 409
// field tenant: it names one with tenant=). Errors
// are *task.FieldError or *apiv1.Error (conflict, not found, the global
// etcd unavailable), mapped by toAPIError like any other.
type Schedules interface {
	// Validate checks a request and builds the definition.
	Validate(req *apiv1.ScheduleRequest) (*apiv1.Schedule, error)
	// Create stores a definition Validate built, its task's tenant settled.
	Create(ctx context.Context, d *apiv1.Schedule, by string) (*apiv1.ScheduleStatus, error)
	List(ctx context.Context, tenant string) ([]apiv1.ScheduleStatus, error)
	Get(ctx context.Context, name, tenant string) (*apiv1.ScheduleStatus, error)
	Delete(ctx context.Context, name, tenant string) error
	SetPaused(ctx context.Context, name, tenant string, paused bool) (*apiv1.ScheduleStatus, error)
}

// scheduleRoutes registers the schedule endpoints (docs/architecture.md §7); the
// internal one a firing uses across regions is in handoff.go.
func (a *API) scheduleRoutes() {
	a.route("POST /v1/schedules", RoleOperator, a.createSchedule)
	a.route("GET /v1/schedules", RoleSubmitter, a.listSchedules)
	a.route("GET /v1/schedules/{name}", RoleSubmitter, a.getSchedule)
	a.route("DELETE /v1/schedules/{name}", RoleOperator, a.deleteSchedule)
	a.route("POST /v1/schedules/{name}/pause", RoleOperator, a.pauseSchedule(true))
	a.route("POST /v1/schedules/{name}/resume", RoleOperator, a.pauseSchedule(false))
}

// schedules is the server's schedules, or a 503 when it runs none.
func (a *API) schedules() (Schedules, error) {
	if a.cfg.Schedules != nil {
		return a.cfg.Schedules, nil
	}
	return nil, &apiError{code: apiv1.CodeUnavailable,
		msg: "this server runs no scheduler: schedules need the global etcd"}
}

func (a *API) createSchedule(w http.ResponseWriter, r *http.Request, p Principal) error {
	sc, err := a.schedules()
	if err != nil {
		return err
	}
	// The schedule's tenant is its task's: a ?tenant= (as the other
	// schedule endpoints take) would be silently ignored.
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		var fe *task.FieldError
		if errors.As(err, &fe) && fe.Field == "tenant" {
			fe.Msg = "not a parameter of a create: the schedule is its task's tenant's (task.tenant)"
		}
		return err
	}
	var req apiv1.ScheduleRequest
	if err := decode(w, r, int64(a.cfg.MaxPayload)+(64<<10), &req); err != nil {
		return err
	}
	d, err := sc.Validate(&req)
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
	// A schedule is a source of tasks: creating one takes a submit from the
	// tenant's quota and, homed here, needs room for a task in its backlog.
	// That is a read, an early answer only: the limit itself holds at each
	// slot, which its home region's submit script checks (docs/security.md).
	if err := a.quotas.take(r.Context(), p, 1, "task"); err != nil {
		return err
	}
	if d.HomeRegion == "" || d.HomeRegion == a.n.Region() {
		if err := a.n.BacklogRoom(r.Context(), tenantOr(d.Task.Tenant), 1); err != nil {
			return err
		}
	}
	if err := a.n.BudgetRoom(tenantOr(d.Task.Tenant)); err != nil {
		return err
	}
	fits := *d.Task
	fits.Tenant = tenantOr(fits.Tenant)
	if err := a.n.BudgetFits(&fits); err != nil {
		e := toAPIError(err)
		e.field = "task"
		return e
	}
	st, err := sc.Create(r.Context(), d, p.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, st)
	return nil
}

func (a *API) listSchedules(w http.ResponseWriter, r *http.Request, p Principal) error {
	sc, err := a.schedules()
	if err != nil {
		return err
	}
	tenant, err := scheduleTenant(r, p)
	if err != nil {
		return err
	}
	list, err := sc.List(r.Context(), tenant)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.ScheduleList{Schedules: list})
	return nil
}

func (a *API) getSchedule(w http.ResponseWriter, r *http.Request, p Principal) error {
	sc, err := a.schedules()
	if err != nil {
		return err
	}
	tenant, err := scheduleTenant(r, p)
	if err != nil {
		return err
	}
	st, err := sc.Get(r.Context(), r.PathValue("name"), tenant)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (a *API) deleteSchedule(w http.ResponseWriter, r *http.Request, p Principal) error {
	sc, err := a.schedules()
	if err != nil {
		return err
	}
	tenant, err := scheduleTenant(r, p)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := sc.Delete(r.Context(), name, tenant); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.ScheduleDeleted{Name: name, Deleted: true})
	return nil
}

// pauseSchedule flips paused.
func (a *API) pauseSchedule(paused bool) handler {
	return func(w http.ResponseWriter, r *http.Request, p Principal) error {
		sc, err := a.schedules()
		if err != nil {
			return err
		}
		tenant, err := scheduleTenant(r, p)
		if err != nil {
			return err
		}
		st, err := sc.SetPaused(r.Context(), r.PathValue("name"), tenant, paused)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, st)
		return nil
	}
}

// scheduleTenant is the tenant whose schedules a request addresses: its
// tenant= (the only parameter these endpoints take), which a token of one
// tenant may give only as its own; without it, a token of one tenant its
// own, one of every tenant every tenant ("").
func scheduleTenant(r *http.Request, p Principal) (string, error) {
	v, err := parseQuery(r.URL.RawQuery, "tenant")
	if err != nil {
		return "", err
	}
	if len(v["tenant"]) > 1 {
		return "", &task.FieldError{Field: "tenant", Msg: "given more than once"}
	}
	return p.scope(v.Get("tenant"), "address the schedules of")
}

package schedules

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// Scheduler is what the schedule endpoints need of the schedules:
// defining them and keeping them; *schedule.Scheduler implements it. Each
// tenant names its schedules in a namespace of its own; tenant is the one a
// request addresses (scheduleTenant): "" every tenant, for a token of every
// tenant (a name two tenants use is then 409 field tenant: it names one
// with tenant=). Errors are *task.FieldError or *apiv1.Error (conflict,
// not found, the global etcd unavailable), mapped by endpoint.ErrorOf like
// any other.
type Scheduler interface {
	Definer
	Keeper
	Backfiller
}

// Backfiller runs a schedule's past periods: a range (backfill), one
// period again (rerun), and lists what it did.
type Backfiller interface {
	Backfill(ctx context.Context, name, tenant string, req *apiv1.BackfillRequest, by string) (*apiv1.Backfill, error)
	Rerun(ctx context.Context, name, tenant string, req *apiv1.RerunRequest, by string) (*apiv1.Backfill, error)
	Backfills(ctx context.Context, name, tenant string) ([]apiv1.Backfill, error)
	CancelBackfill(ctx context.Context, name, tenant, id, by string) (*apiv1.Backfill, error)
	// Grid is the schedule's latest periods × its nodes (periods from 1
	// to apiv1.GridPeriodsMax, else a field error naming periods).
	Grid(ctx context.Context, name, tenant string, periods int) (*apiv1.ScheduleGrid, error)
}

// Definer makes schedules (POST /v1/schedules).
type Definer interface {
	// Validate checks a request and builds the definition.
	Validate(req *apiv1.ScheduleRequest) (*apiv1.Schedule, error)
	// Create stores a definition Validate built, its task's tenant settled.
	Create(ctx context.Context, d *apiv1.Schedule, by string) (*apiv1.ScheduleStatus, error)
}

// Keeper reads, pauses, resumes and deletes the schedules of tenant.
type Keeper interface {
	List(ctx context.Context, tenant string) ([]apiv1.ScheduleStatus, error)
	Get(ctx context.Context, name, tenant string) (*apiv1.ScheduleStatus, error)
	Delete(ctx context.Context, name, tenant string) error
	SetPaused(ctx context.Context, name, tenant string, paused bool) (*apiv1.ScheduleStatus, error)
}

// Federation is what the schedule endpoints need of the federation;
// *federation.Node implements it.
type Federation interface {
	// Region is this server's region.
	Region() string
	// BacklogRoom refuses count more tasks of tenant its backlog has no
	// room for.
	BacklogRoom(ctx context.Context, tenant string, count int) error
	// BudgetRoom refuses a tenant over its monthly budget.
	BudgetRoom(tenant string) error
	// BudgetFits refuses a spec no pool under its tenant's cap matches.
	BudgetFits(sp *task.Spec) error
}

// Config is what the schedule endpoints are served from.
type Config struct {
	Scheduler  Scheduler // nil: 503, this server runs no scheduler
	Fed        Federation
	Quotas     *endpoint.Quotas
	MaxPayload int // bytes of one task's payload
}

// Handlers serves /v1/schedules.
type Handlers struct{ cfg Config }

// New builds the schedule endpoints of cfg.
func New(cfg Config) *Handlers { return &Handlers{cfg: cfg} }

// Routes are the schedule endpoints (docs/architecture.md §7); the
// internal one a firing uses across regions is handoff's.
func (srv *Handlers) Routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "POST /v1/schedules", Role: endpoint.RoleOperator, Handle: srv.createSchedule},
		{Pattern: "GET /v1/schedules", Role: endpoint.RoleSubmitter, Handle: srv.listSchedules},
		{Pattern: "GET /v1/schedules/{name}", Role: endpoint.RoleSubmitter, Handle: srv.getSchedule},
		{Pattern: "DELETE /v1/schedules/{name}", Role: endpoint.RoleOperator, Handle: srv.deleteSchedule},
		{Pattern: "POST /v1/schedules/{name}/pause", Role: endpoint.RoleOperator, Handle: srv.pauseSchedule(true)},
		{Pattern: "POST /v1/schedules/{name}/resume", Role: endpoint.RoleOperator, Handle: srv.pauseSchedule(false)},
		{Pattern: "POST /v1/schedules/{name}/backfill", Role: endpoint.RoleOperator, Handle: srv.backfill},
		{Pattern: "POST /v1/schedules/{name}/rerun", Role: endpoint.RoleOperator, Handle: srv.rerun},
		{Pattern: "GET /v1/schedules/{name}/backfills", Role: endpoint.RoleSubmitter, Handle: srv.listBackfills},
		{Pattern: "GET /v1/schedules/{name}/grid", Role: endpoint.RoleSubmitter, Handle: srv.grid},
		{Pattern: "POST /v1/schedules/{name}/backfills/{id}/cancel", Role: endpoint.RoleOperator, Handle: srv.cancelBackfill},
	}
}

// scheduler is the server's schedules, or a 503 when it runs none.
func (srv *Handlers) scheduler() (Scheduler, error) {
	if srv.cfg.Scheduler != nil {
		return srv.cfg.Scheduler, nil
	}
	return nil, &endpoint.Error{Code: apiv1.CodeUnavailable,
		Msg: "this server runs no scheduler: schedules need the global etcd"}
}

func (srv *Handlers) createSchedule(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, err := srv.scheduler()
	if err != nil {
		return err
	}
	// The schedule's tenant is its task's: a ?tenant= (as the other
	// schedule endpoints take) would be silently ignored.
	if _, err := endpoint.ParseQuery(r.URL.RawQuery); err != nil {
		var fe *task.FieldError
		if errors.As(err, &fe) && fe.Field == "tenant" {
			fe.Msg = "not a parameter of a create: the schedule is its task's tenant's (task.tenant)"
		}
		return err
	}
	var req apiv1.ScheduleRequest
	if err := endpoint.Decode(w, r, int64(srv.cfg.MaxPayload)+(64<<10), &req); err != nil {
		return err
	}
	d, err := sc.Validate(&req)
	if err != nil {
		return err
	}
	if d.DAG != nil {
		if err := srv.admitDAG(r.Context(), d, p); err != nil {
			return err
		}
		st, err := sc.Create(r.Context(), d, p.Name)
		if err != nil {
			return err
		}
		endpoint.WriteJSON(w, http.StatusCreated, st)
		return nil
	}
	if err := endpoint.ApplyTenant(d.Task, p, srv.cfg.MaxPayload); err != nil {
		var ae *endpoint.Error
		if errors.As(err, &ae) && ae.Field != "" {
			c := *ae
			c.Field = "task." + ae.Field
			return &c
		}
		return err
	}
	// A schedule is a source of tasks: creating one takes a submit from the
	// tenant's quota and, homed here, needs room for a task in its backlog.
	// That is a read, an early answer only: the limit itself holds at each
	// slot, which its home region's submit script checks (docs/security.md).
	if err := srv.cfg.Quotas.Take(r.Context(), p, 1, "task"); err != nil {
		return err
	}
	if d.HomeRegion == "" || d.HomeRegion == srv.cfg.Fed.Region() {
		if err := srv.cfg.Fed.BacklogRoom(r.Context(), endpoint.TenantOr(d.Task.Tenant), 1); err != nil {
			return err
		}
	}
	if err := srv.cfg.Fed.BudgetRoom(endpoint.TenantOr(d.Task.Tenant)); err != nil {
		return err
	}
	fits := *d.Task
	fits.Tenant = endpoint.TenantOr(fits.Tenant)
	if err := srv.cfg.Fed.BudgetFits(&fits); err != nil {
		e := endpoint.ErrorOf(err)
		e.Field = "task"
		return e
	}
	st, err := sc.Create(r.Context(), d, p.Name)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusCreated, st)
	return nil
}

func (srv *Handlers) listSchedules(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, err := srv.scheduler()
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
	endpoint.WriteJSON(w, http.StatusOK, apiv1.ScheduleList{Schedules: list})
	return nil
}

func (srv *Handlers) getSchedule(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, err := srv.scheduler()
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
	endpoint.WriteJSON(w, http.StatusOK, st)
	return nil
}

func (srv *Handlers) deleteSchedule(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, err := srv.scheduler()
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
	endpoint.WriteJSON(w, http.StatusOK, apiv1.ScheduleDeleted{Name: name, Deleted: true})
	return nil
}

// pauseSchedule flips paused.
func (srv *Handlers) pauseSchedule(paused bool) endpoint.Handler {
	return func(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
		sc, err := srv.scheduler()
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
		endpoint.WriteJSON(w, http.StatusOK, st)
		return nil
	}
}

// scheduleTenant is the tenant whose schedules a request addresses: its
// tenant= (the only parameter these endpoints take), which a token of one
// tenant may give only as its own; without it, a token of one tenant its
// own, one of every tenant every tenant ("").
func scheduleTenant(r *http.Request, p endpoint.Principal, params ...string) (string, error) {
	v, err := endpoint.ParseQuery(r.URL.RawQuery, append([]string{"tenant"}, params...)...)
	if err != nil {
		return "", err
	}
	if len(v["tenant"]) > 1 {
		return "", &task.FieldError{Field: "tenant", Msg: "given more than once"}
	}
	return p.Scope(v.Get("tenant"), "address the schedules of")
}

// admitDAG settles a DAG schedule's tenant and admits it as POST /v1/dags
// admits a run, once: each node takes a submit from the tenant's quota,
// and, homed here, needs room in its backlog; a node a token may not
// submit, or no pool under the tenant's cap matches, is refused naming
// dag.nodes[i].task.
func (srv *Handlers) admitDAG(ctx context.Context, d *apiv1.Schedule, p endpoint.Principal) error {
	dr := d.DAG
	if p.Tenant != "" {
		if dr.Tenant != "" && dr.Tenant != p.Tenant {
			return &endpoint.Error{Code: apiv1.CodeForbidden, Msg: "this token may only submit for tenant " + p.Tenant, Field: "dag.tenant"}
		}
		dr.Tenant = p.Tenant
	}
	tenant := endpoint.TenantOr(dr.Tenant)
	specs := map[int]*task.Spec{}
	for i, nd := range dr.Nodes {
		sp, err := task.DecodeSpec(nd.Task)
		if err != nil {
			continue // Create names it
		}
		if err := endpoint.CheckTrust(sp, p); err != nil {
			e := endpoint.ErrorOf(err)
			e.Field = fmt.Sprintf("dag.nodes[%d].task.%s", i, e.Field)
			return e
		}
		if len(sp.Payload) > srv.cfg.MaxPayload {
			return &endpoint.Error{Code: apiv1.CodeTooLarge, Field: fmt.Sprintf("dag.nodes[%d].task.payload", i),
				Msg: fmt.Sprintf("payload larger than %d bytes", srv.cfg.MaxPayload)}
		}
		sp.Tenant = tenant
		specs[i] = sp
	}
	n := max(len(dr.Nodes), 1)
	if err := srv.cfg.Quotas.Take(ctx, p, n, "nodes"); err != nil {
		return err
	}
	if d.HomeRegion == "" || d.HomeRegion == srv.cfg.Fed.Region() {
		if err := srv.cfg.Fed.BacklogRoom(ctx, tenant, n); err != nil {
			return err
		}
	}
	if err := srv.cfg.Fed.BudgetRoom(tenant); err != nil {
		return err
	}
	for i := range dr.Nodes {
		sp := specs[i]
		if sp == nil {
			continue
		}
		if err := srv.cfg.Fed.BudgetFits(sp); err != nil {
			e := endpoint.ErrorOf(err)
			e.Field = fmt.Sprintf("dag.nodes[%d].task", i)
			return e
		}
	}
	return nil
}

// backfill is POST /v1/schedules/{name}/backfill: 201 with the backfill,
// which the federation leader then runs.
func (srv *Handlers) backfill(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, tenant, err := srv.addressed(r, p)
	if err != nil {
		return err
	}
	var req apiv1.BackfillRequest
	if err := endpoint.Decode(w, r, 4<<10, &req); err != nil {
		return err
	}
	bf, err := sc.Backfill(r.Context(), r.PathValue("name"), tenant, &req, p.Name)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusCreated, bf)
	return nil
}

// rerun is POST /v1/schedules/{name}/rerun: 201 with the rerun (a
// backfill of one period under a new run id).
func (srv *Handlers) rerun(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, tenant, err := srv.addressed(r, p)
	if err != nil {
		return err
	}
	var req apiv1.RerunRequest
	if err := endpoint.Decode(w, r, 4<<10, &req); err != nil {
		return err
	}
	bf, err := sc.Rerun(r.Context(), r.PathValue("name"), tenant, &req, p.Name)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusCreated, bf)
	return nil
}

func (srv *Handlers) listBackfills(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, tenant, err := srv.addressed(r, p)
	if err != nil {
		return err
	}
	list, err := sc.Backfills(r.Context(), r.PathValue("name"), tenant)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.BackfillList{Backfills: list})
	return nil
}

// grid is GET /v1/schedules/{name}/grid?periods=N: 200 with the
// schedule's latest N periods (default apiv1.GridPeriodsDefault) × nodes.
func (srv *Handlers) grid(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, tenant, err := srv.addressed(r, p, "periods")
	if err != nil {
		return err
	}
	n := apiv1.GridPeriodsDefault
	if v := r.URL.Query().Get("periods"); v != "" {
		if n, err = strconv.Atoi(v); err != nil {
			return &task.FieldError{Field: "periods", Msg: "a whole number of periods, from 1 to 50"}
		}
	}
	g, err := sc.Grid(r.Context(), r.PathValue("name"), tenant, n)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, g)
	return nil
}

// cancelBackfill is POST /v1/schedules/{name}/backfills/{id}/cancel: 200
// with the backfill, CANCELED (or as it ended).
func (srv *Handlers) cancelBackfill(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	sc, tenant, err := srv.addressed(r, p)
	if err != nil {
		return err
	}
	bf, err := sc.CancelBackfill(r.Context(), r.PathValue("name"), tenant, r.PathValue("id"), p.Name)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, bf)
	return nil
}

// addressed is the server's schedules and the tenant a request addresses;
// params are the endpoint's query parameters besides tenant.
func (srv *Handlers) addressed(r *http.Request, p endpoint.Principal, params ...string) (Scheduler, string, error) {
	sc, err := srv.scheduler()
	if err != nil {
		return nil, "", err
	}
	tenant, err := scheduleTenant(r, p, params...)
	return sc, tenant, err
}

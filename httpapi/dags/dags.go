package dags

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// Runs is what the DAG endpoints need of the DAG runs; *dag.Runs
// implements it. Errors
// are *task.FieldError, federation.ErrDAGNotFound, and the federation's own
// (a home region unreachable), mapped by endpoint.ErrorOf like any other.
type Runs interface {
	// Create validates and starts a run in this region, its tenant settled.
	Create(ctx context.Context, req *apiv1.DAGRequest) (*apiv1.DAGStatus, error)
	// Status reads a run wherever it lives (hops: see Node.Get).
	Status(ctx context.Context, id string, hops int) (*apiv1.DAGStatus, error)
	// Cancel cancels a run of tenant ("" any) wherever it lives, as by.
	Cancel(ctx context.Context, id, tenant, by string, hops int) (*apiv1.DAGStatus, error)
	// List reads this region's runs that match f, newest first, and the
	// cursor of the next page ("" at the end).
	List(ctx context.Context, f apiv1.DAGFilter) ([]apiv1.DAGSummary, string, error)
	// StartHere starts a schedule's run in this region under its derived
	// id, once: a refusal of the run itself is the answer's Refused.
	StartHere(ctx context.Context, sd *apiv1.ScheduledDAG) (*apiv1.ScheduledDAGResponse, error)
}

// Federation is what the DAG endpoints need of the federation;
// *federation.Node implements it.
type Federation interface {
	// Region is this server's region.
	Region() string
	// FanOutRegions are the regions a listing asks (only: that one).
	FanOutRegions(only string, hops int) ([]string, error)
	// Proxy asks a server of regionName and decodes its answer into out.
	Proxy(ctx context.Context, regionName, method, path string, in, out any) error
	// BudgetRoom refuses a tenant over its monthly budget.
	BudgetRoom(tenant string) error
	// BudgetFits refuses a spec no pool under its tenant's cap matches.
	BudgetFits(sp *task.Spec) error
}

// Config is what the DAG endpoints are served from.
type Config struct {
	Runs       Runs // nil: 503, this server runs no DAG runs
	Fed        Federation
	Quotas     *endpoint.Quotas
	MaxPayload int // bytes of one task's payload
}

// Handlers serves /v1/dags.
type Handlers struct{ cfg Config }

// New builds the DAG endpoints of cfg.
func New(cfg Config) *Handlers { return &Handlers{cfg: cfg} }

// Routes are POST /v1/dags, GET /v1/dags, GET /v1/dags/{id} and POST
// /v1/dags/{id}/cancel. Cancelling is an operator action, as for tasks
// (docs/architecture.md §7 roles).
func (srv *Handlers) Routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "POST /v1/dags", Role: endpoint.RoleSubmitter, Handle: srv.createDAG},
		{Pattern: "GET /v1/dags", Role: endpoint.RoleSubmitter, Handle: srv.listDAGs},
		{Pattern: "GET /v1/dags/{id}", Role: endpoint.RoleSubmitter, Handle: srv.getDAG},
		{Pattern: "POST /v1/dags/{id}/cancel", Role: endpoint.RoleOperator, Handle: srv.cancelDAG},
		// The router lets only the cluster token call an internal route.
		{Pattern: "POST /v1/internal/dags", Role: endpoint.RoleAdmin, Handle: srv.startScheduled},
	}
}

// startScheduled serves POST /v1/internal/dags: the federation leader
// starts a DAG schedule's run of one period here, its home region.
func (srv *Handlers) startScheduled(w http.ResponseWriter, r *http.Request, _ endpoint.Principal) error {
	dags, err := srv.runs()
	if err != nil {
		return err
	}
	limit := min(int64(apiv1.MaxDAGNodes)*int64(srv.cfg.MaxPayload+4<<10), 64<<20)
	var sd apiv1.ScheduledDAG
	if err := endpoint.Decode(w, r, limit, &sd); err != nil {
		return err
	}
	resp, err := dags.StartHere(r.Context(), &sd)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// runs is the server's DAG runs, or a 503 when it serves none.
func (srv *Handlers) runs() (Runs, error) {
	if srv.cfg.Runs != nil {
		return srv.cfg.Runs, nil
	}
	return nil, &endpoint.Error{Code: apiv1.CodeUnavailable,
		Msg: "this server runs no DAG runs"}
}

// dagWire is a DAGRequest as read: nodes are decoded one by one, so an
// error names its node.
type dagWire struct {
	Name   string            `json:"name"`
	Tenant string            `json:"tenant"`
	Nodes  []json.RawMessage `json:"nodes"`
}

func (srv *Handlers) createDAG(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	dags, err := srv.runs()
	if err != nil {
		return err
	}
	// Room for every node's payload, within reason.
	limit := min(int64(apiv1.MaxDAGNodes)*int64(srv.cfg.MaxPayload+4<<10), 64<<20)
	var wire dagWire
	if err := endpoint.Decode(w, r, limit, &wire); err != nil {
		return err
	}
	req := apiv1.DAGRequest{Name: wire.Name, Tenant: wire.Tenant, Nodes: make([]apiv1.DAGNodeSpec, len(wire.Nodes))}
	if len(wire.Nodes) > apiv1.MaxDAGNodes {
		return &task.FieldError{Field: "nodes", Msg: fmt.Sprintf("at most %d nodes", apiv1.MaxDAGNodes)}
	}
	for i, raw := range wire.Nodes {
		nd, err := decodeDAGNode(i, raw)
		if err != nil {
			return err
		}
		// A spec that does not decode is refused by Create, naming it.
		if sp, err := task.DecodeSpec(nd.Task); err == nil {
			if err := endpoint.CheckTrust(sp, p); err != nil {
				e := err.(*endpoint.Error)
				e.Field = fmt.Sprintf("nodes[%d].task.%s", i, e.Field)
				return e
			}
		}
		req.Nodes[i] = nd
	}
	if p.Tenant != "" {
		if req.Tenant != "" && req.Tenant != p.Tenant {
			return &endpoint.Error{Code: apiv1.CodeForbidden, Msg: "this token may only submit for tenant " + p.Tenant, Field: "tenant"}
		}
		req.Tenant = p.Tenant
	}
	// Each node is a task: the DAG takes its nodes from the tenant's submit
	// quota, and Create reserves room for them in its backlog (429 naming
	// max_backlog when there is none).
	if err := srv.cfg.Quotas.Take(r.Context(), p, len(req.Nodes), "nodes"); err != nil {
		return err
	}
	if err := srv.cfg.Fed.BudgetRoom(endpoint.TenantOr(req.Tenant)); err != nil {
		return err
	}
	for i, nd := range req.Nodes {
		// Past a cap budget, a node no pool under the cap matches is the
		// 422 its submit would get, naming the node.
		if sp, err := task.DecodeSpec(nd.Task); err == nil {
			sp.Tenant = endpoint.TenantOr(req.Tenant)
			if err := srv.cfg.Fed.BudgetFits(sp); err != nil {
				e := endpoint.ErrorOf(err)
				e.Field = fmt.Sprintf("nodes[%d].task", i)
				return e
			}
		}
	}
	st, err := dags.Create(r.Context(), &req)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusCreated, st)
	return nil
}

// decodeDAGNode strictly decodes node i; errors name nodes[i].<field>.
func decodeDAGNode(i int, raw json.RawMessage) (apiv1.DAGNodeSpec, error) {
	var nd apiv1.DAGNodeSpec
	err := endpoint.DecodeStrict(raw, &nd)
	if err == nil {
		return nd, nil
	}
	fe := err.FieldError("a node is an object")
	switch {
	case err.Fault == endpoint.FaultNotObject:
		fe.Msg = "must be an object"
	case err.Fault == endpoint.FaultUnknown && isSpecField(err.Field):
		fe.Msg = `unknown field: a node's task spec goes under "task"`
	}
	return nd, fe.Under(fmt.Sprintf("nodes[%d]", i))
}

// isSpecField reports whether key is a field of a task spec (a node that
// has one is a spec written where its "task" should be).
func isSpecField(key string) bool {
	return task.HasJSONField(reflect.TypeFor[task.Spec](), key)
}

func (srv *Handlers) getDAG(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	dags, err := srv.runs()
	if err != nil {
		return err
	}
	st, err := dags.Status(r.Context(), r.PathValue("id"), endpoint.Hops(r))
	if err != nil {
		return err
	}
	if !p.Sees(st.Tenant) {
		return federation.ErrDAGNotFound // another tenant's run is as absent as a missing one
	}
	endpoint.WriteJSON(w, http.StatusOK, st)
	return nil
}

// cancelDAG is POST /v1/dags/{id}/cancel: 200 with the run (GET's shape,
// cancel_requested_at set), also for a repeat and for a run that had already
// ended (then unchanged). Operators (and admins) cancel the runs they see,
// as they cancel tasks; a tenant-bound operator only its tenant's: another
// tenant's run is 404, as for reads. The body, if any, must be empty or {}.
func (srv *Handlers) cancelDAG(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	dags, err := srv.runs()
	if err != nil {
		return err
	}
	if err := endpoint.EmptyBody(w, r); err != nil {
		return err
	}
	tenant := p.Tenant
	if p.Cluster {
		tenant = r.URL.Query().Get(apiv1.ParamForTenant) // the forwarding server's caller
	}
	st, err := dags.Cancel(r.Context(), r.PathValue("id"), tenant, endpoint.Actor(r, p), endpoint.Hops(r))
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, st)
	return nil
}

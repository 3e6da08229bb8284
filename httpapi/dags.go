package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/task"
)

// DAGs is what the DAG endpoints need; *dag.Runs implements it. Errors
// are *task.FieldError, federation.ErrDAGNotFound, and the federation's own
// (a home region unreachable), mapped by toAPIError like any other.
type DAGs interface {
	// Create validates and starts a run in this region, its tenant settled.
	Create(ctx context.Context, req *apiv1.DAGRequest) (*apiv1.DAGStatus, error)
	// Status reads a run wherever it lives (hops: see Node.Get).
	Status(ctx context.Context, id string, hops int) (*apiv1.DAGStatus, error)
	// Cancel cancels a run of tenant ("" any) wherever it lives, as by.
	Cancel(ctx context.Context, id, tenant, by string, hops int) (*apiv1.DAGStatus, error)
	// List reads this region's runs that match f, newest first, and the
	// cursor of the next page ("" at the end).
	List(ctx context.Context, f apiv1.DAGFilter) ([]apiv1.DAGSummary, string, error)
}

// dagRoutes registers POST /v1/dags, GET /v1/dags/{id} and POST
// /v1/dags/{id}/cancel (called by New).
func (a *API) dagRoutes() {
	a.route("POST /v1/dags", RoleSubmitter, a.createDAG)
	a.route("GET /v1/dags", RoleSubmitter, a.listDAGs)
	a.route("GET /v1/dags/{id}", RoleSubmitter, a.getDAG)
	// Cancelling is an operator action, as for tasks (docs/architecture.md §7 roles).
	a.route("POST /v1/dags/{id}/cancel", RoleOperator, a.cancelDAG)
}

// dags is the server's DAG runs, or a 503 when it serves none.
func (a *API) dags() (DAGs, error) {
	if a.cfg.DAGs != nil {
		return a.cfg.DAGs, nil
	}
	return nil, &apiError{code: apiv1.CodeUnavailable,
		msg: "this server runs no DAG runs"}
}

// dagWire is a DAGRequest as read: nodes are decoded one by one, so an
// error names its node.
type dagWire struct {
	Name   string            `json:"name"`
	Tenant string            `json:"tenant"`
	Nodes  []json.RawMessage `json:"nodes"`
}

func (a *API) createDAG(w http.ResponseWriter, r *http.Request, p Principal) error {
	dags, err := a.dags()
	if err != nil {
		return err
	}
	// Room for every node's payload, within reason.
	limit := min(int64(apiv1.MaxDAGNodes)*int64(a.cfg.MaxPayload+4<<10), 64<<20)
	var wire dagWire
	if err := decode(w, r, limit, &wire); err != nil {
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
			if err := checkTrust(sp, p); err != nil {
				e := err.(*apiError)
				e.field = fmt.Sprintf("nodes[%d].task.%s", i, e.field)
				return e
			}
		}
		req.Nodes[i] = nd
	}
	if p.Tenant != "" {
		if req.Tenant != "" && req.Tenant != p.Tenant {
			return &apiError{code: apiv1.CodeForbidden, msg: "this token may only submit for tenant " + p.Tenant, field: "tenant"}
		}
		req.Tenant = p.Tenant
	}
	// Each node is a task: the DAG takes its nodes from the tenant's submit
	// quota, and Create reserves room for them in its backlog (429 naming
	// max_backlog when there is none).
	if err := a.quotas.take(r.Context(), p, len(req.Nodes), "nodes"); err != nil {
		return err
	}
	if err := a.n.BudgetRoom(tenantOr(req.Tenant)); err != nil {
		return err
	}
	for i, nd := range req.Nodes {
		// Past a cap budget, a node no pool under the cap matches is the
		// 422 its submit would get, naming the node.
		if sp, err := task.DecodeSpec(nd.Task); err == nil {
			sp.Tenant = tenantOr(req.Tenant)
			if err := a.n.BudgetFits(sp); err != nil {
				e := toAPIError(err)
				e.field = fmt.Sprintf("nodes[%d].task", i)
				return e
			}
		}
	}
	st, err := dags.Create(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, st)
	return nil
}

// decodeDAGNode strictly decodes node i; errors name nodes[i].<field>.
func decodeDAGNode(i int, raw json.RawMessage) (apiv1.DAGNodeSpec, error) {
	var nd apiv1.DAGNodeSpec
	err := decodeStrict(raw, &nd)
	if err == nil {
		return nd, nil
	}
	fe := err.fieldError("a node is an object")
	switch {
	case err.fault == faultNotObject:
		fe.Msg = "must be an object"
	case err.fault == faultUnknown && isSpecField(err.field):
		fe.Msg = `unknown field: a node's task spec goes under "task"`
	}
	return nd, fe.Under(fmt.Sprintf("nodes[%d]", i))
}

// isSpecField reports whether key is a field of a task spec (a node that
// has one is a spec written where its "task" should be).
func isSpecField(key string) bool {
	return task.HasJSONField(reflect.TypeFor[task.Spec](), key)
}

func (a *API) getDAG(w http.ResponseWriter, r *http.Request, p Principal) error {
	dags, err := a.dags()
	if err != nil {
		return err
	}
	st, err := dags.Status(r.Context(), r.PathValue("id"), hops(r))
	if err != nil {
		return err
	}
	if !p.sees(st.Tenant) {
		return federation.ErrDAGNotFound // another tenant's run is as absent as a missing one
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// cancelDAG is POST /v1/dags/{id}/cancel: 200 with the run (GET's shape,
// cancel_requested_at set), also for a repeat and for a run that had already
// ended (then unchanged). Operators (and admins) cancel the runs they see,
// as they cancel tasks; a tenant-bound operator only its tenant's: another
// tenant's run is 404, as for reads. The body, if any, must be empty or {}.
func (a *API) cancelDAG(w http.ResponseWriter, r *http.Request, p Principal) error {
	dags, err := a.dags()
	if err != nil {
		return err
	}
	if err := emptyBody(w, r); err != nil {
		return err
	}
	tenant := p.Tenant
	if p.Cluster {
		tenant = r.URL.Query().Get(apiv1.ParamForTenant) // the forwarding server's caller
	}
	st, err := dags.Cancel(r.Context(), r.PathValue("id"), tenant, actor(r, p), hops(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// emptyBody accepts a request without a body, or with {}: the body of an
// action that takes no arguments.
func emptyBody(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(w, r, 4<<10)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var none struct{}
	if derr := decodeStrict(b, &none); derr != nil {
		if derr.fault == faultUnknown {
			return &task.FieldError{Field: derr.field, Msg: "unknown field: this action takes no arguments"}
		}
		return &task.FieldError{Msg: "the body must be empty or {}"}
	}
	return nil
}

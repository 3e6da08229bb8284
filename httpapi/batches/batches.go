package batches

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/batch"
	"github.com/ax-sched/ax/federation/submit"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

// Batches is what the batch endpoints need; *batch.Batches implements it.
// Errors are *task.FieldError, *apiv1.Error (404 no such batch) and the
// federation's own, mapped by endpoint.ErrorOf.
type Batches interface {
	// Create validates and creates a batch in this region, submitting its
	// members through submit; rejected are the refused members by index.
	// A request whose idempotency key answered with an earlier create's
	// batch is that batch, Duplicate.
	Create(ctx context.Context, req *batch.Request, submit batch.SubmitFunc) (*apiv1.BatchStatus, map[int]error, error)
	// Validate checks a request as Create does before it stores anything.
	Validate(req *batch.Request) error
	// Status reads a batch wherever its home is, of tenant ("": any).
	Status(ctx context.Context, id, tenant string) (*apiv1.BatchStatus, error)
	// List reads this region's batches of tenant ("": any), newest first.
	List(ctx context.Context, tenant string, limit int, after string) ([]apiv1.BatchStatus, string, error)
	// Cancel asks every member of batch id (of tenant, "": any) not ended
	// yet to stop, as by.
	Cancel(ctx context.Context, id, tenant, by string) (*apiv1.BatchStatus, error)
	// Report counts members' ends another region reported.
	Report(ctx context.Context, req *apiv1.BatchEnds) (*apiv1.BatchEndsResponse, error)
}

// Submitter is the submit path; *federation.Node implements it.
type Submitter interface {
	SubmitWithin(ctx context.Context, q submit.Quota, specs []*task.Spec, forwarded bool) ([]submit.Outcome, error)
}

// Federation is how a listing reaches the other regions;
// *federation.Node implements it.
type Federation interface {
	// Region is this server's region.
	Region() string
	// KeyHome is the region that keeps tenant's idempotency key.
	KeyHome(tenant, key string) string
	// FanOutRegions are the regions a listing asks (only: that one).
	FanOutRegions(only string, hops int) ([]string, error)
	// Proxy asks a server of regionName and decodes its answer into out.
	Proxy(ctx context.Context, regionName, method, path string, in, out any) error
}

// Config is what the batch endpoints are served from.
type Config struct {
	Batches    Batches // nil: 503, this server keeps no batches
	Submitter  Submitter
	Fed        Federation
	Quotas     *endpoint.Quotas
	MaxPayload int // bytes of one task's payload
}

// Handlers serves /v1/batches.
type Handlers struct{ cfg Config }

// New builds the batch endpoints of cfg.
func New(cfg Config) *Handlers { return &Handlers{cfg: cfg} }

// Routes are POST /v1/batches, GET /v1/batches, GET /v1/batches/{id},
// POST /v1/batches/{id}/cancel (an operator action, as for tasks and
// DAG runs) and the internal POST /v1/internal/batches/ends.
func (h *Handlers) Routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "POST /v1/batches", Role: endpoint.RoleSubmitter, Handle: h.create},
		{Pattern: "GET /v1/batches", Role: endpoint.RoleSubmitter, Handle: h.list},
		{Pattern: "GET /v1/batches/{id}", Role: endpoint.RoleSubmitter, Handle: h.get},
		{Pattern: "POST /v1/batches/{id}/cancel", Role: endpoint.RoleOperator, Handle: h.cancel},
		// The router lets only the cluster token call an internal route.
		{Pattern: "POST /v1/internal/batches/ends", Role: endpoint.RoleAdmin, Handle: h.report},
	}
}

func (h *Handlers) batches() (Batches, error) {
	if h.cfg.Batches != nil {
		return h.cfg.Batches, nil
	}
	return nil, &endpoint.Error{Code: apiv1.CodeUnavailable, Msg: "this server keeps no batches"}
}

// bodyLimit is room for every member's payload, within reason.
func (h *Handlers) bodyLimit() int64 {
	return min(int64(apiv1.MaxBatchMembers)*int64(h.cfg.MaxPayload+4<<10), 64<<20)
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	bs, err := h.batches()
	if err != nil {
		return err
	}
	var req apiv1.BatchCreate
	if err := endpoint.Decode(w, r, h.bodyLimit(), &req); err != nil {
		return err
	}
	if n := len(req.Tasks); n == 0 || n > apiv1.MaxBatchMembers {
		return &task.FieldError{Field: "tasks", Msg: fmt.Sprintf("a batch holds 1 to %d tasks (%d given)", apiv1.MaxBatchMembers, n)}
	}
	if p.Tenant != "" {
		if req.Tenant != "" && req.Tenant != p.Tenant {
			return &endpoint.Error{Code: apiv1.CodeForbidden, Msg: "this token may only submit for tenant " + p.Tenant, Field: "tenant"}
		}
		req.Tenant = p.Tenant
	}
	members := make([]*task.Spec, len(req.Tasks))
	for i, raw := range req.Tasks {
		sp, err := h.spec(r.Context(), raw, req.Tenant, p)
		if err != nil {
			return named(err, fmt.Sprintf("tasks[%d]", i))
		}
		members[i] = sp
	}
	var cbs [2]*task.Spec
	for k, c := range []struct {
		field string
		raw   json.RawMessage
	}{{"on_complete", req.OnComplete}, {"on_success", req.OnSuccess}} {
		if len(c.raw) == 0 || string(c.raw) == "null" {
			continue
		}
		sp, err := h.spec(r.Context(), c.raw, req.Tenant, p)
		if err != nil {
			return named(err, c.field)
		}
		cbs[k] = sp
	}
	breq := &batch.Request{Name: req.Name, Tenant: endpoint.TenantOr(req.Tenant), Members: members,
		OnComplete: cbs[0], OnSuccess: cbs[1], IdempotencyKey: req.IdempotencyKey}
	if home := h.keyHome(breq, p); home != "" {
		if err := bs.Validate(breq); err != nil {
			return err
		}
		return h.forward(w, r, p, home, &req, breq.Tenant)
	}
	st, rejected, err := bs.Create(r.Context(), breq, h.send(h.cfg.Quotas.Of(p)))
	if err != nil {
		return err
	}
	if st.Duplicate {
		endpoint.WriteJSON(w, http.StatusOK, st)
		return nil
	}
	for i := range len(req.Tasks) {
		if rerr, ok := rejected[i]; ok {
			e := endpoint.ErrorOf(rerr)
			e.ScopeTo(p.Tenant)
			b := e.Body()
			b.Field = fieldUnder(b.Field, fmt.Sprintf("tasks[%d]", i))
			st.Rejected = append(st.Rejected, apiv1.BatchRejected{Index: i, Status: e.Status(), Error: &b})
		}
	}
	endpoint.WriteJSON(w, http.StatusCreated, st)
	return nil
}

// send submits a part of a batch's members within quota.
func (h *Handlers) send(quota submit.Quota) batch.SubmitFunc {
	return func(ctx context.Context, specs []*task.Spec) ([]string, []error, error) {
		outs, err := h.cfg.Submitter.SubmitWithin(ctx, quota, specs, false)
		if err != nil {
			return nil, nil, err
		}
		ids, errs := make([]string, len(outs)), make([]error, len(outs))
		for i, o := range outs {
			ids[i], errs[i] = o.ID, o.Err
			if o.Err != nil {
				ids[i] = ""
			}
		}
		return ids, errs, nil
	}
}

// keyHome is the region a create with an idempotency key goes to when it
// is not this one ("": create here). Another server's request was routed
// by it already.
func (h *Handlers) keyHome(req *batch.Request, p endpoint.Principal) string {
	if req.IdempotencyKey == "" || p.Cluster || h.cfg.Fed == nil {
		return ""
	}
	if home := h.cfg.Fed.KeyHome(req.Tenant, req.IdempotencyKey); home != h.cfg.Fed.Region() {
		return home
	}
	return ""
}

// forward sends a create, validated here, to the home region of
// its idempotency key, which keeps the key and the batch; it answers as
// that region did. The caller's quota is taken here first, part by part
// as a create here would take it (the home does not count another
// server's request).
func (h *Handlers) forward(w http.ResponseWriter, r *http.Request, p endpoint.Principal, home string, req *apiv1.BatchCreate, tenant string) error {
	for start := 0; start < len(req.Tasks); start += apiv1.MaxBatch {
		if err := h.cfg.Quotas.Take(r.Context(), p, min(apiv1.MaxBatch, len(req.Tasks)-start), "tasks"); err != nil {
			return err
		}
	}
	req.Tenant = tenant
	var st apiv1.BatchStatus
	if err := h.cfg.Fed.Proxy(r.Context(), home, http.MethodPost, "/v1/batches", req, &st); err != nil {
		return err
	}
	for _, rj := range st.Rejected {
		// The home answered another server: scope its explanations to
		// the caller, as an answer made here is.
		if e := rj.Error; e != nil && e.Explanation != nil && p.Tenant != "" {
			ex := *e.Explanation
			ex.Candidates = slices.Clone(ex.Candidates)
			endpoint.ScopeExplanation(&ex)
			e.Explanation = &ex
		}
	}
	status := http.StatusCreated
	if st.Duplicate {
		status = http.StatusOK
	}
	endpoint.WriteJSON(w, status, &st)
	return nil
}

// spec decodes one spec of a batch and gives it the batch's tenant (the
// checks of a submit: no internal fields, the caller's trust, the
// payload's size, the memory reserve).
func (h *Handlers) spec(ctx context.Context, raw json.RawMessage, tenant string, p endpoint.Principal) (*task.Spec, error) {
	sp, err := task.DecodeSpec(raw)
	if err != nil {
		return nil, err
	}
	if sp.Tenant != "" && tenant != "" && sp.Tenant != tenant {
		return nil, &task.FieldError{Field: "tenant", Msg: "a batch's tasks are of the batch's tenant (" + tenant + ")"}
	}
	if tenant != "" {
		sp.Tenant = tenant
	}
	if err := endpoint.ApplyTenant(sp, p, h.cfg.MaxPayload); err != nil {
		return nil, err
	}
	if sp.Tenant == "" {
		sp.Tenant = endpoint.TenantOr(tenant)
	}
	return sp, h.cfg.Quotas.Admit(ctx, sp.Tenant, len(sp.Payload))
}

// named is err with its field under prefix.
func named(err error, prefix string) error {
	e := endpoint.ErrorOf(err)
	e.Field = fieldUnder(e.Field, prefix)
	return e
}

func fieldUnder(field, prefix string) string {
	if field == "" {
		return prefix
	}
	return prefix + "." + field
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	bs, err := h.batches()
	if err != nil {
		return err
	}
	st, err := bs.Status(r.Context(), r.PathValue("id"), p.Tenant)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, st)
	return nil
}

// cancel is POST /v1/batches/{id}/cancel: 200 with the batch, also for a
// repeat and for a batch that completed (then unchanged). The body, if
// any, must be empty or {}.
func (h *Handlers) cancel(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	bs, err := h.batches()
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
	st, err := bs.Cancel(r.Context(), r.PathValue("id"), tenant, endpoint.Actor(r, p))
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, st)
	return nil
}

// maxEnds bounds the ends of one internal report.
const maxEnds = 10000

func (h *Handlers) report(w http.ResponseWriter, r *http.Request, _ endpoint.Principal) error {
	bs, err := h.batches()
	if err != nil {
		return err
	}
	var req apiv1.BatchEnds
	if err := endpoint.Decode(w, r, 4<<20, &req); err != nil {
		return err
	}
	if len(req.Ends) > maxEnds {
		return &task.FieldError{Field: "ends", Msg: fmt.Sprintf("at most %d", maxEnds)}
	}
	resp, err := bs.Report(r.Context(), &req)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, resp)
	return nil
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/federation/submit"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/trace"
)

// Submitter is the submission path; *federation.Node implements it.
type Submitter interface {
	// SubmitWithin takes the specs from q's bucket, all or none (a
	// refusal is the request's error), then places and stores them, one
	// outcome each, in order.
	SubmitWithin(ctx context.Context, q submit.Quota, specs []*task.Spec, forwarded bool) ([]submit.Outcome, error)
	// Explain places sp without storing it, saying why each pool won or not.
	Explain(sp *task.Spec) (placement.Explanation, error)
}

// TaskActions reads and acts on a task wherever it is held;
// *federation.Node implements it.
type TaskActions interface {
	// GetAs reads a task for a caller who sees only tenant's ("": every
	// tenant's); another tenant's is task.ErrNotFound at the cost of a
	// missing id's.
	GetAs(ctx context.Context, id string, hops int, tenant string) (*task.Task, error)
	Trail(ctx context.Context, id string, hops int) ([]task.Transition, error)
	Act(ctx context.Context, op fanout.TaskOp, id string, priority int, by string, hops int) (task.State, error)
}

// Listings are the reads and the bulk action that gather every region's
// part; *federation.Node implements it.
type Listings interface {
	Tasks(ctx context.Context, q fanout.TaskQuery, hops int) (*fanout.DeadLetterPage, error)
	DeadLetters(ctx context.Context, q fanout.DLQQuery, hops int) (*fanout.DeadLetterPage, error)
	BulkCancel(ctx context.Context, f federation.Filter, only, by string, hops int) (*fanout.BulkCanceled, error)
	Cost(ctx context.Context, q fanout.CostQuery, hops int) (*fanout.CostReport, error)
	// Budgets are tenant's monthly budgets ("" every tenant's).
	Budgets(tenant string) []apiv1.CostBudget
}

// Regions is the federation's view of its regions and the drain of this
// one; *federation.Node implements it.
type Regions interface {
	Region() string
	View() *view.View
	// Proxy asks a server of regionName and decodes its answer into out.
	Proxy(ctx context.Context, regionName, method, path string, in, out any) error
	// Drain moves this region's waiting tasks elsewhere at rate tasks/s.
	Drain(ctx context.Context, rate int) (int, error)
}

// taskHandlers serves the task endpoints, the listings, the regions and
// placement explanations.
type taskHandlers struct {
	sub      Submitter
	acts     TaskActions
	lists    Listings
	regs     Regions
	cfg      Config
	quotas   *endpoint.Quotas
	refusals *refusalMeter // of GET /v1/regions (overview.go)
}

func newTaskHandlers(n *federation.Node, cfg Config, quotas *endpoint.Quotas, refusals *refusalMeter) *taskHandlers {
	th := &taskHandlers{sub: n, acts: n, lists: n, regs: n, cfg: cfg, quotas: quotas, refusals: refusals}
	th.refusals.perMinute(time.Now()) // the base: refusals count from the server's start
	return th
}

func (th *taskHandlers) routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "POST /v1/tasks", Role: RoleSubmitter, Handle: th.submit},
		{Pattern: "POST /v1/tasks/batch", Role: RoleSubmitter, Handle: th.submitBatch},
		{Pattern: "GET /v1/tasks/{id}", Role: RoleSubmitter, Handle: th.get},
		{Pattern: "GET /v1/tasks/{id}/trail", Role: RoleSubmitter, Handle: th.trail},
		{Pattern: "POST /v1/tasks/{id}/cancel", Role: RoleOperator, Handle: th.act(fanout.OpCancel)},
		{Pattern: "POST /v1/tasks/{id}/replay", Role: RoleOperator, Handle: th.act(fanout.OpReplay)},
		{Pattern: "POST /v1/tasks/{id}/priority", Role: RoleOperator, Handle: th.act(fanout.OpPriority)},
		{Pattern: "POST /v1/tasks/cancel", Role: RoleOperator, Handle: th.bulkCancel},
		{Pattern: "GET /v1/tasks", Role: RoleSubmitter, Handle: th.listTasks},
		{Pattern: "GET /v1/dlq", Role: RoleSubmitter, Handle: th.dlq},
		{Pattern: "GET /v1/cost", Role: RoleSubmitter, Handle: th.cost},
		{Pattern: "GET /v1/regions", Role: RoleSubmitter, Handle: th.regions},
		{Pattern: "POST /v1/regions/{region}/drain", Role: RoleOperator, Handle: th.drain},
		{Pattern: "POST /v1/placement/explain", Role: RoleSubmitter, Handle: th.explain},
	}
}

// readSpec reads one spec body and applies the principal's tenant.
func (th *taskHandlers) readSpec(w http.ResponseWriter, r *http.Request, p Principal) (*task.Spec, error) {
	b, err := endpoint.ReadBody(w, r, int64(th.cfg.MaxPayload)+64<<10)
	if err != nil {
		return nil, err
	}
	sp, err := task.DecodeSpec(b)
	if err != nil {
		return nil, err
	}
	return sp, endpoint.ApplyTenant(sp, p, th.cfg.MaxPayload)
}

func respOf(o submit.Outcome) *apiv1.SubmitResponse {
	r := &apiv1.SubmitResponse{ID: o.ID, State: o.State, Region: o.Region, Duplicate: o.Duplicate}
	if o.Pool != "" {
		pool := o.Pool
		r.Pool = &pool
	}
	return r
}

func (th *taskHandlers) submit(w http.ResponseWriter, r *http.Request, p Principal) error {
	sp, err := th.readSpec(w, r, p)
	if err != nil {
		return err
	}
	if err := th.quotas.Admit(r.Context(), sp.Tenant, len(sp.Payload)); err != nil {
		return err
	}
	outs, err := th.sub.SubmitWithin(joinTrace(r, sp), th.quotas.Of(p), []*task.Spec{sp}, endpoint.Hops(r) > 0)
	if err != nil {
		return err
	}
	o := outs[0]
	if o.Err != nil {
		return o.Err
	}
	status := http.StatusCreated
	if o.Duplicate {
		status = http.StatusOK
	}
	endpoint.WriteJSON(w, status, respOf(o))
	return nil
}

func (th *taskHandlers) submitBatch(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req apiv1.BatchRequest
	if err := endpoint.Decode(w, r, th.cfg.BatchMaxBytes, &req); err != nil {
		var tl *endpoint.TooLargeError
		if errors.As(err, &tl) {
			return &endpoint.Error{Code: apiv1.CodeTooLarge, Field: "tasks",
				Msg: fmt.Sprintf("a batch body holds at most %d bytes on this server (quotas.batch.max_bytes): send smaller batches", tl.Limit)}
		}
		return err
	}
	if len(req.Tasks) == 0 || len(req.Tasks) > th.cfg.BatchMaxItems {
		return &endpoint.Error{Code: apiv1.CodeInvalid, Msg: fmt.Sprintf("a batch holds 1 to %d tasks", th.cfg.BatchMaxItems), Field: "tasks"}
	}
	resp := apiv1.BatchResponse{Results: make([]apiv1.BatchItem, len(req.Tasks))}
	var specs []*task.Spec
	var idx []int
	for i, raw := range req.Tasks {
		sp, err := task.DecodeSpec(raw)
		if err == nil {
			err = endpoint.ApplyTenant(sp, p, th.cfg.MaxPayload)
		}
		if err == nil {
			err = th.quotas.Admit(r.Context(), sp.Tenant, len(sp.Payload))
		}
		if err != nil {
			e := endpoint.ErrorOf(err)
			b := e.Body()
			if b.Field != "" {
				b.Field = fmt.Sprintf("tasks[%d].%s", i, b.Field)
			}
			resp.Results[i] = apiv1.BatchItem{Status: e.Status(), Error: &b}
			continue
		}
		specs = append(specs, sp)
		idx = append(idx, i)
	}
	outs, err := th.sub.SubmitWithin(joinTrace(r, specs...), th.quotas.Of(p), specs, endpoint.Hops(r) > 0)
	if err != nil {
		return err
	}
	for k, o := range outs {
		i := idx[k]
		if o.Err != nil {
			e := endpoint.ErrorOf(o.Err)
			e.ScopeTo(p.Tenant)
			b := e.Body()
			if b.Field != "" {
				b.Field = fmt.Sprintf("tasks[%d].%s", i, b.Field)
			}
			resp.Results[i] = apiv1.BatchItem{Status: e.Status(), Error: &b}
			continue
		}
		st := http.StatusCreated
		if o.Duplicate {
			st = http.StatusOK
		}
		resp.Results[i] = apiv1.BatchItem{Status: st, Task: respOf(o)}
	}
	for _, it := range resp.Results {
		if it.Error != nil {
			resp.Rejected++
		} else {
			resp.Accepted++
		}
	}
	endpoint.WriteJSON(w, http.StatusOK, resp)
	return nil
}

func (th *taskHandlers) get(w http.ResponseWriter, r *http.Request, p Principal) error {
	t, err := th.getFor(r.Context(), p, r.PathValue("id"), endpoint.Hops(r))
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, t)
	return nil
}

// getFor reads a task the principal may see: one of another tenant is
// ErrNotFound (404), so ids of other tenants do not leak — also while the
// region it was handed to is unreachable (a 503 only for its own tenant).
func (th *taskHandlers) getFor(ctx context.Context, p Principal, id string, h int) (*task.Task, error) {
	t, err := th.acts.GetAs(ctx, id, h, p.Tenant)
	var hu *fanout.HolderUnreachableError
	switch {
	case errors.As(err, &hu) && !p.Sees(hu.Record.Tenant):
		return nil, task.ErrNotFound
	case err != nil:
		return nil, err
	case !p.Sees(t.Tenant):
		return nil, task.ErrNotFound
	}
	return t, nil
}

// visible checks the principal may see the task (404 otherwise).
func (th *taskHandlers) visible(ctx context.Context, p Principal, id string, h int) error {
	if p.Tenant == "" {
		return nil
	}
	_, err := th.getFor(ctx, p, id, h)
	return err
}

func (th *taskHandlers) trail(w http.ResponseWriter, r *http.Request, p Principal) error {
	id := r.PathValue("id")
	if err := th.visible(r.Context(), p, id, endpoint.Hops(r)); err != nil {
		return err
	}
	tr, err := th.acts.Trail(r.Context(), id, endpoint.Hops(r))
	if err != nil {
		return err
	}
	if tr == nil {
		tr = []task.Transition{}
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.TrailResponse{ID: id, Transitions: tr})
	return nil
}

func (th *taskHandlers) act(op fanout.TaskOp) endpoint.Handler {
	return func(w http.ResponseWriter, r *http.Request, p Principal) error {
		id := r.PathValue("id")
		prio := 0
		if op == fanout.OpPriority {
			var req apiv1.PriorityRequest
			if err := endpoint.Decode(w, r, 4<<10, &req); err != nil {
				return err
			}
			if req.Priority == nil {
				return &task.FieldError{Field: "priority", Msg: "is required"}
			}
			if *req.Priority < 0 || *req.Priority > task.MaxPriority {
				return &task.FieldError{Field: "priority", Msg: fmt.Sprintf("must be between 0 and %d", task.MaxPriority)}
			}
			prio = *req.Priority
		}
		if err := th.visible(r.Context(), p, id, endpoint.Hops(r)); err != nil {
			return err
		}
		st, err := th.acts.Act(r.Context(), op, id, prio, endpoint.Actor(r, p), endpoint.Hops(r))
		if err != nil {
			return err
		}
		switch op {
		case fanout.OpCancel:
			// RUNNING: the worker stops it; PENDING: its hand-off to another
			// region is in flight and carries the cancel there.
			endpoint.WriteJSON(w, http.StatusOK, apiv1.CancelResponse{ID: id, State: st, Requested: st == task.Running || st == task.Pending})
		default:
			t, err := th.acts.GetAs(r.Context(), id, endpoint.Hops(r), p.Tenant)
			if err != nil {
				return err
			}
			endpoint.WriteJSON(w, http.StatusOK, t)
		}
		return nil
	}
}

// bulkCancel is POST /v1/tasks/cancel: every region's matching PENDING and
// READY tasks (or region's only), answered with per-region counts; see
// federation.Node.BulkCancel for regions that do not answer.
func (th *taskHandlers) bulkCancel(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req apiv1.BulkCancelRequest
	if err := endpoint.Decode(w, r, 4<<10, &req); err != nil {
		return err
	}
	if req.Type == "" && req.State == "" && req.Tenant == "" {
		return &task.FieldError{Field: "type", Msg: "give at least one of type, state, tenant"}
	}
	if req.State != "" && req.State != task.Pending && req.State != task.Ready {
		return &task.FieldError{Field: "state", Msg: "must be PENDING or READY"}
	}
	tenant, err := p.Scope(req.Tenant, "act on")
	if err != nil {
		return err
	}
	req.Tenant = tenant
	f := federation.Filter{Type: req.Type, Tenant: req.Tenant, State: req.State}
	res, err := th.lists.BulkCancel(r.Context(), f, req.Region, endpoint.Actor(r, p), endpoint.Hops(r))
	if err != nil {
		return err
	}
	resp := apiv1.BulkCancelResponse{Canceled: res.Canceled, Regions: endpoint.Outcomes(res.Regions), Unavailable: res.Unavailable}
	endpoint.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// dlq is GET /v1/dlq: every region's dead letters (or only those of
// region=), merged newest first and paged by cursor; see federation.Node.DeadLetters.
func (th *taskHandlers) dlq(w http.ResponseWriter, r *http.Request, p Principal) error {
	q, err := parseDLQQuery(r.URL.RawQuery, p)
	if err != nil {
		return err
	}
	pg, err := th.lists.DeadLetters(r.Context(), q, endpoint.Hops(r))
	if err != nil {
		return err
	}
	resp := apiv1.TaskList{Tasks: pg.Tasks, NextCursor: pg.NextCursor, Regions: endpoint.Outcomes(pg.Regions), Unavailable: pg.Unavailable}
	endpoint.WriteJSON(w, http.StatusOK, resp)
	return nil
}

func (th *taskHandlers) regions(w http.ResponseWriter, _ *http.Request, _ Principal) error {
	endpoint.WriteJSON(w, http.StatusOK, th.regionsResponse())
	return nil
}

func (th *taskHandlers) regionsResponse() apiv1.RegionsResponse {
	now := time.Now()
	resp := apiv1.RegionsResponse{GlobalView: th.regs.View().Connected(), Regions: []apiv1.RegionStatus{}}
	refused := th.refusals.perMinute(now)
	for _, ri := range th.regs.View().Regions() {
		rs := apiv1.RegionStatus{Name: ri.Region, Provider: ri.Provider, API: ri.API, Leader: ri.Leader, Healthy: ri.Healthy, Stale: ri.Stale,
			UpdatedAt: ri.UpdatedAt, Servers: th.regs.View().Servers(ri.Region)}
		for _, p := range ri.Pools {
			ps := apiv1.PoolStatus{
				Name: p.Name, Tags: p.Tags, Slots: p.Slots, Workers: p.Workers, Running: p.Running, Ready: p.Ready,
				RunningSlots:  p.Busy(),
				Parked:        p.Parked,
				QueueCapacity: p.QueueCapacity, Utilisation: p.Utilisation(), QueueFill: p.QueueFill(),
				PricePerSlotHour: p.PricePerSlotHour, Spot: p.Spot, Discount: p.Discount, Paused: p.Paused,
				CapacityWindow: windowStatus(p.Schedule, now), Starving: p.Starving, WaitP99Seconds: p.WaitP99Seconds,
			}
			windowSlots(&ps, p.ScaleFromZero)
			rs.Pools = append(rs.Pools, ps)
			if refused.byPool != nil {
				v := refused.pool(ri.Region, p.Name)
				rs.Pools[len(rs.Pools)-1].RefusedPerMinute = &v
			}
		}
		if ri.Region == th.regs.Region() {
			rs.RefusedPerMinute = refused.byReason
		}
		resp.Regions = append(resp.Regions, rs)
	}
	return resp
}

func (th *taskHandlers) drain(w http.ResponseWriter, r *http.Request, p Principal) error {
	// Draining moves every tenant's work: not for a token of one tenant.
	if p.Tenant != "" {
		return &endpoint.Error{Code: apiv1.CodeForbidden, Field: "Authorization", Msg: "draining a region needs a token of every tenant"}
	}
	name := r.PathValue("region")
	if name != th.regs.Region() {
		if endpoint.Hops(r) > 0 {
			return &fanout.NotServedError{Region: name}
		}
		var resp apiv1.DrainResponse
		path := "/v1/regions/" + url.PathEscape(name) + "/drain"
		if r.URL.RawQuery != "" {
			path += "?" + r.URL.RawQuery // the rate goes with the request
		}
		if err := th.regs.Proxy(r.Context(), name, http.MethodPost, path, struct{}{}, &resp); err != nil {
			return err
		}
		endpoint.WriteJSON(w, http.StatusOK, resp)
		return nil
	}
	rate := 200
	if v := r.URL.Query().Get("rate"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return &task.FieldError{Field: "rate", Msg: "must be a positive integer (tasks per second)"}
		}
		rate = n
	}
	n, err := th.regs.Drain(r.Context(), rate)
	if err != nil {
		return err
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.DrainResponse{Region: name, Moved: n})
	return nil
}

func (th *taskHandlers) explain(w http.ResponseWriter, r *http.Request, p Principal) error {
	sp, err := th.readSpec(w, r, p)
	if err != nil {
		return err
	}
	ex, err := th.sub.Explain(sp)
	if err != nil {
		return err
	}
	out := endpoint.ExplanationOf(ex)
	if p.Tenant != "" {
		endpoint.ScopeExplanation(&out)
	}
	endpoint.WriteJSON(w, http.StatusOK, out)
	return nil
}

// maxDLQOffset bounds GET /v1/dlq's offset= (ten pages of the largest
// limit); the cursor pages on without a bound.
const maxDLQOffset = 10 * fanout.MaxDLQLimit

// parseDLQQuery reads GET /v1/dlq's parameters; a scoped principal lists
// its own tenant's (tenant= naming another is 403). An unknown parameter is refused rather
// than ignored: a typo (typ=) must not turn a filtered listing into a full
// one.
func parseDLQQuery(raw string, p Principal) (fanout.DLQQuery, error) {
	q := fanout.DLQQuery{Limit: 100}
	v, err := endpoint.ParseQuery(raw, "type", "tenant", "region", "limit", "offset", "cursor")
	if err != nil {
		return q, err
	}
	if s := v.Get("limit"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > fanout.MaxDLQLimit {
			return q, &task.FieldError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d", fanout.MaxDLQLimit)}
		}
		q.Limit = k
	}
	if s := v.Get("offset"); s != "" {
		// The skipped pages are read and merged from every region: an
		// unbounded offset let one request walk every region's whole DLQ.
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 || k > maxDLQOffset {
			return q, &task.FieldError{Field: "offset", Msg: fmt.Sprintf("must be 0..%d (page further with cursor)", maxDLQOffset)}
		}
		q.Offset = k
	}
	// The cursor is the listing's to read (federation.Node.DeadLetters).
	q.Type, q.Region, q.Cursor = v.Get("type"), v.Get("region"), v.Get("cursor")
	q.Tenant, err = p.Scope(v.Get("tenant"), "list")
	return q, err
}

// joinTrace makes the request's trace — its HTTP server span's
// (tracing.Handler), else its W3C traceparent header's — the trace of the
// specs that name none, and that span the parent of their submit spans.
// The trace id is not part of a spec's idempotency hash, so a retry under
// another trace is still the same task.
func joinTrace(r *http.Request, specs ...*task.Spec) context.Context {
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() && !sc.IsRemote() {
		for _, sp := range specs {
			if sp.TraceID == "" {
				sp.TraceID = sc.TraceID().String()
			}
		}
		return r.Context()
	}
	sc, ok := tracing.ParseTraceparent(r.Header.Get("traceparent"))
	if !ok || !sc.IsValid() {
		return r.Context()
	}
	for _, sp := range specs {
		if sp.TraceID == "" {
			sp.TraceID = sc.TraceID().String()
		}
	}
	return trace.ContextWithRemoteSpanContext(r.Context(), sc)
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/trace"
)

// readSpec reads one spec body and applies the principal's tenant.
func (a *API) readSpec(w http.ResponseWriter, r *http.Request, p Principal) (*task.Spec, error) {
	b, err := readBody(w, r, int64(a.cfg.MaxPayload)+64<<10)
	if err != nil {
		return nil, err
	}
	sp, err := task.DecodeSpec(b)
	if err != nil {
		return nil, err
	}
	return sp, a.applyTenant(sp, p)
}

// checkTrust refuses what only operators may ask for: priority 0 (the most
// urgent, which preempts others and is promoted first) and critical (which
// bypasses backpressure). Tokens below operator get 403 naming the field;
// other servers forward what their own caller was allowed.
func checkTrust(sp *task.Spec, p Principal) error {
	if p.Role >= RoleOperator || p.Cluster {
		return nil
	}
	if sp.Priority != nil && *sp.Priority == 0 {
		return &apiError{code: apiv1.CodeForbidden, field: "priority",
			msg: "priority 0 is for operator tokens: use 1 to 4"}
	}
	if sp.Critical {
		return &apiError{code: apiv1.CodeForbidden, field: "critical",
			msg: "critical tasks (which bypass backpressure) are for operator tokens"}
	}
	return nil
}

func (a *API) applyTenant(sp *task.Spec, p Principal) error {
	if err := checkTrust(sp, p); err != nil {
		return err
	}
	if p.Tenant != "" {
		if sp.Tenant != "" && sp.Tenant != p.Tenant {
			return &apiError{code: apiv1.CodeForbidden, msg: "this token may only submit for tenant " + p.Tenant, field: "tenant"}
		}
		sp.Tenant = p.Tenant
	}
	if len(sp.Payload) > a.cfg.MaxPayload {
		return &apiError{code: apiv1.CodeTooLarge, msg: fmt.Sprintf("payload larger than %d bytes", a.cfg.MaxPayload), field: "payload"}
	}
	return nil
}

func respOf(o federation.Outcome) *apiv1.SubmitResponse {
	r := &apiv1.SubmitResponse{ID: o.ID, State: o.State, Region: o.Region, Duplicate: o.Duplicate}
	if o.Pool != "" {
		pool := o.Pool
		r.Pool = &pool
	}
	return r
}

func (a *API) submit(w http.ResponseWriter, r *http.Request, p Principal) error {
	sp, err := a.readSpec(w, r, p)
	if err != nil {
		return err
	}
	if err := a.quotas.take(r.Context(), p, 1, "tasks"); err != nil {
		return err
	}
	o := a.n.Submit(joinTrace(r, sp), []*task.Spec{sp}, hops(r) > 0)[0]
	if o.Err != nil {
		return o.Err
	}
	status := http.StatusCreated
	if o.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, respOf(o))
	return nil
}

func (a *API) submitBatch(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req apiv1.BatchRequest
	if err := decode(w, r, a.cfg.BatchMaxBytes, &req); err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) {
			return &apiError{code: apiv1.CodeTooLarge, field: "tasks",
				msg: fmt.Sprintf("a batch body holds at most %d bytes on this server (quotas.batch.max_bytes): send smaller batches", tl.Limit)}
		}
		return err
	}
	if len(req.Tasks) == 0 || len(req.Tasks) > a.cfg.BatchMaxItems {
		return &apiError{code: apiv1.CodeInvalid, msg: fmt.Sprintf("a batch holds 1 to %d tasks", a.cfg.BatchMaxItems), field: "tasks"}
	}
	resp := apiv1.BatchResponse{Results: make([]apiv1.BatchItem, len(req.Tasks))}
	var specs []*task.Spec
	var idx []int
	for i, raw := range req.Tasks {
		sp, err := task.DecodeSpec(raw)
		if err == nil {
			err = a.applyTenant(sp, p)
		}
		if err != nil {
			e := toAPIError(err)
			b := e.body()
			if b.Field != "" {
				b.Field = fmt.Sprintf("tasks[%d].%s", i, b.Field)
			}
			resp.Results[i] = apiv1.BatchItem{Status: e.status(), Error: &b}
			continue
		}
		specs = append(specs, sp)
		idx = append(idx, i)
	}
	if err := a.quotas.take(r.Context(), p, len(specs), "tasks"); err != nil {
		return err
	}
	for k, o := range a.n.Submit(joinTrace(r, specs...), specs, hops(r) > 0) {
		i := idx[k]
		if o.Err != nil {
			e := toAPIError(o.Err)
			b := e.body()
			if b.Field != "" {
				b.Field = fmt.Sprintf("tasks[%d].%s", i, b.Field)
			}
			resp.Results[i] = apiv1.BatchItem{Status: e.status(), Error: &b}
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
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (a *API) get(w http.ResponseWriter, r *http.Request, p Principal) error {
	t, err := a.getFor(r.Context(), p, r.PathValue("id"), hops(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// getFor reads a task the principal may see: one of another tenant is
// ErrNotFound (404), so ids of other tenants do not leak — also while the
// region it was handed to is unreachable (a 503 only for its own tenant).
func (a *API) getFor(ctx context.Context, p Principal, id string, h int) (*task.Task, error) {
	t, err := a.n.Get(ctx, id, h)
	var hu *federation.HolderUnreachableError
	switch {
	case errors.As(err, &hu) && !p.sees(hu.Record.Tenant):
		return nil, task.ErrNotFound
	case err != nil:
		return nil, err
	case !p.sees(t.Tenant):
		return nil, task.ErrNotFound
	}
	return t, nil
}

// visible checks the principal may see the task (404 otherwise).
func (a *API) visible(ctx context.Context, p Principal, id string, h int) error {
	if p.Tenant == "" {
		return nil
	}
	_, err := a.getFor(ctx, p, id, h)
	return err
}

func (a *API) trail(w http.ResponseWriter, r *http.Request, p Principal) error {
	id := r.PathValue("id")
	if err := a.visible(r.Context(), p, id, hops(r)); err != nil {
		return err
	}
	tr, err := a.n.Trail(r.Context(), id, hops(r))
	if err != nil {
		return err
	}
	if tr == nil {
		tr = []task.Transition{}
	}
	writeJSON(w, http.StatusOK, apiv1.TrailResponse{ID: id, Transitions: tr})
	return nil
}

func (a *API) act(op federation.TaskOp) handler {
	return func(w http.ResponseWriter, r *http.Request, p Principal) error {
		id := r.PathValue("id")
		prio := 0
		if op == federation.OpPriority {
			var req apiv1.PriorityRequest
			if err := decode(w, r, 4<<10, &req); err != nil {
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
		if err := a.visible(r.Context(), p, id, hops(r)); err != nil {
			return err
		}
		st, err := a.n.Act(r.Context(), op, id, prio, actor(r, p), hops(r))
		if err != nil {
			return err
		}
		switch op {
		case federation.OpCancel:
			// RUNNING: the worker stops it; PENDING: its hand-off to another
			// region is in flight and carries the cancel there.
			writeJSON(w, http.StatusOK, apiv1.CancelResponse{ID: id, State: st, Requested: st == task.Running || st == task.Pending})
		default:
			t, err := a.n.Get(r.Context(), id, hops(r))
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, t)
		}
		return nil
	}
}

// bulkCancel is POST /v1/tasks/cancel: every region's matching PENDING and
// READY tasks (or region's only), answered with per-region counts; see
// fanout.go for regions that do not answer.
func (a *API) bulkCancel(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req apiv1.BulkCancelRequest
	if err := decode(w, r, 4<<10, &req); err != nil {
		return err
	}
	if req.Type == "" && req.State == "" && req.Tenant == "" {
		return &task.FieldError{Field: "type", Msg: "give at least one of type, state, tenant"}
	}
	if req.State != "" && req.State != task.Pending && req.State != task.Ready {
		return &task.FieldError{Field: "state", Msg: "must be PENDING or READY"}
	}
	tenant, err := p.scope(req.Tenant, "act on")
	if err != nil {
		return err
	}
	req.Tenant = tenant
	f := federation.Filter{Type: req.Type, Tenant: req.Tenant, State: req.State}
	res, err := a.n.BulkCancel(r.Context(), f, req.Region, actor(r, p), hops(r))
	if err != nil {
		return err
	}
	resp := apiv1.BulkCancelResponse{Canceled: res.Canceled, Regions: outcomes(res.Regions), Unavailable: res.Unavailable}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// dlq is GET /v1/dlq: every region's dead letters (or only those of
// region=), merged newest first and paged by cursor; see fanout.go.
func (a *API) dlq(w http.ResponseWriter, r *http.Request, p Principal) error {
	q, err := parseDLQQuery(r.URL.RawQuery, p)
	if err != nil {
		return err
	}
	pg, err := a.n.DeadLetters(r.Context(), q, hops(r))
	if err != nil {
		return err
	}
	resp := apiv1.TaskList{Tasks: pg.Tasks, NextCursor: pg.NextCursor, Regions: outcomes(pg.Regions), Unavailable: pg.Unavailable}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (a *API) regions(w http.ResponseWriter, _ *http.Request, _ Principal) error {
	writeJSON(w, http.StatusOK, a.regionsResponse())
	return nil
}

func (a *API) regionsResponse() apiv1.RegionsResponse {
	now := time.Now()
	resp := apiv1.RegionsResponse{GlobalView: a.n.View().Connected(), Regions: []apiv1.RegionStatus{}}
	refused := a.refusals.perMinute(now)
	for _, ri := range a.n.View().Regions() {
		rs := apiv1.RegionStatus{Name: ri.Region, Provider: ri.Provider, API: ri.API, Leader: ri.Leader, Healthy: ri.Healthy, Stale: ri.Stale,
			UpdatedAt: ri.UpdatedAt, Servers: a.n.View().Servers(ri.Region)}
		for _, p := range ri.Pools {
			rs.Pools = append(rs.Pools, apiv1.PoolStatus{
				Name: p.Name, Tags: p.Tags, Slots: p.Slots, Workers: p.Workers, Running: p.Running, Ready: p.Ready,
				Parked:        p.Parked,
				QueueCapacity: p.QueueCapacity, Utilisation: p.Utilisation(), QueueFill: p.QueueFill(),
				PricePerSlotHour: p.PricePerSlotHour, Spot: p.Spot, Discount: p.Discount, Paused: p.Paused,
				CapacityWindow: windowStatus(p.Schedule, now), Starving: p.Starving,
			})
			if refused.byPool != nil {
				v := refused.pool(ri.Region, p.Name)
				rs.Pools[len(rs.Pools)-1].RefusedPerMinute = &v
			}
		}
		if ri.Region == a.n.Region() {
			rs.RefusedPerMinute = refused.byReason
		}
		resp.Regions = append(resp.Regions, rs)
	}
	return resp
}

func (a *API) drain(w http.ResponseWriter, r *http.Request, p Principal) error {
	// Draining moves every tenant's work: not for a token of one tenant.
	if p.Tenant != "" {
		return &apiError{code: apiv1.CodeForbidden, field: "Authorization", msg: "draining a region needs a token of every tenant"}
	}
	name := r.PathValue("region")
	if name != a.n.Region() {
		if hops(r) > 0 {
			return &federation.NotServedError{Region: name}
		}
		var resp apiv1.DrainResponse
		path := "/v1/regions/" + url.PathEscape(name) + "/drain"
		if r.URL.RawQuery != "" {
			path += "?" + r.URL.RawQuery // the rate goes with the request
		}
		if err := a.n.Proxy(r.Context(), name, http.MethodPost, path, struct{}{}, &resp); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, resp)
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
	n, err := a.n.Drain(r.Context(), rate)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.DrainResponse{Region: name, Moved: n})
	return nil
}

func (a *API) explain(w http.ResponseWriter, r *http.Request, p Principal) error {
	sp, err := a.readSpec(w, r, p)
	if err != nil {
		return err
	}
	ex, err := a.n.Explain(sp)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toExplanation(ex))
	return nil
}

func toExplanation(ex placement.Explanation) apiv1.Explanation {
	out := apiv1.Explanation{Candidates: make([]apiv1.Candidate, 0, len(ex.Candidates)), Rule: string(ex.Rule)}
	for _, c := range ex.Candidates {
		ac := apiv1.Candidate{Region: c.Region, Pool: c.Pool, Rejected: string(c.Reason), Detail: c.Detail, PricePerSlotHour: c.Price,
			ExpectedSeconds: c.Duration.Seconds(), EstimateSource: string(c.DurationSource), Observations: c.Observations,
			SpreadSeconds: c.Spread.Seconds(), BaseCost: c.BaseCost, Penalty: c.Penalty, CrossRegion: c.CrossRegion,
			Score: c.Cost, QueueFill: c.Fill, Chosen: c.Won,
			ExpectedWaitSeconds: c.Wait.Seconds(), TasksAhead: c.Ahead, DrainPerSecond: c.DrainRate,
			WaitSource: string(c.WaitSource), WaitTargetSeconds: c.WaitTarget.Seconds(), OverWaitTarget: c.OverTarget}
		out.Candidates = append(out.Candidates, ac)
		if c.Won {
			cc := ac
			out.Chosen = &cc
		}
	}
	switch err := ex.Decision.Err(); {
	case err == nil:
		out.Outcome = "PLACED"
	case errors.Is(err, placement.ErrUnplaceable):
		out.Outcome = "UNPLACEABLE"
	case errors.Is(err, placement.ErrSaturated):
		out.Outcome = "SATURATED"
	default:
		out.Outcome = "NO_CAPACITY"
	}
	return out
}

func (a *API) events(w http.ResponseWriter, r *http.Request, p Principal) error {
	q := r.URL.Query()
	release, err := a.polls.acquire(poller(p))
	if err != nil {
		return err
	}
	defer release()
	if reg := q.Get("region"); reg != "" && reg != a.n.Region() {
		if hops(r) > 0 {
			return &federation.NotServedError{Region: reg}
		}
		wait, _, err := parseEventsQuery(q)
		if err != nil {
			return err
		}
		// Calls to peers time out (federation's peer client, 10 s): a
		// longer wait would end every quiet poll of another region in a
		// 503. Its answer comes within maxProxiedWait, empty if need be,
		// and the caller polls again.
		if wait > maxProxiedWait {
			q.Set("wait", maxProxiedWait.String())
		}
		var resp apiv1.EventsResponse
		path := "/v1/events?" + q.Encode()
		if err := a.n.Proxy(r.Context(), reg, http.MethodGet, path, nil, &resp); err != nil {
			return err
		}
		resp.Events = scopeEvents(resp.Events, p)
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	wait, after, err := parseEventsQuery(q)
	if err != nil {
		return err
	}
	// The server's read and write timeouts would end a long-poll early:
	// this request gets its wait on top of them.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	evs, next, err := a.n.Events(r.Context(), after, 200, max(wait, time.Millisecond))
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []task.Event{}
	}
	writeJSON(w, http.StatusOK, apiv1.EventsResponse{Region: a.n.Region(), Events: scopeEvents(evs, p), Next: strings.Join(next, ",")})
	return nil
}

// maxProxiedWait bounds the wait of a long-poll of another region's events
// (its server is asked through the peer client, whose calls time out).
const maxProxiedWait = 5 * time.Second

// parseEventsQuery reads GET /v1/events's wait= (default 10s, at most 1m)
// and after= (the previous answer's next: one stream id per shard, each
// "<ms>-<seq>", "<ms>", "$" or empty). No after starts at the newest entry:
// a first call returns only new events. A malformed id would reach Redis
// and come back as its error, a 503, instead of the caller's 400.
func parseEventsQuery(q url.Values) (time.Duration, []string, error) {
	wait := 10 * time.Second
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Minute {
			return 0, nil, &task.FieldError{Field: "wait", Msg: "a duration up to 1m"}
		}
		wait = d
	}
	var after []string
	if v := q.Get("after"); v != "" {
		after = strings.Split(v, ",")
		for _, id := range after {
			if !streamID(id) {
				return 0, nil, &task.FieldError{Field: "after", Msg: "stream ids \"<ms>-<seq>\", comma-separated, as the last answer's next"}
			}
		}
	}
	return wait, after, nil
}

// streamID reports whether s is an id XREAD takes: "", "$", "<ms>" or
// "<ms>-<seq>", each part a 64-bit unsigned number.
func streamID(s string) bool {
	if s == "" || s == "$" {
		return true
	}
	ms, seq, two := strings.Cut(s, "-")
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil {
		return false
	}
	if two {
		_, err := strconv.ParseUint(seq, 10, 64)
		return err == nil
	}
	return true
}

// scopeEvents hides task ids from a token of one tenant: the stream is the
// region's, every tenant's tasks in it. What happened and how many tasks
// stay; which tasks is for tokens of every tenant.
func scopeEvents(evs []task.Event, p Principal) []task.Event {
	if p.Tenant == "" {
		return evs
	}
	for i := range evs {
		evs[i].Tasks = nil
	}
	return evs
}

// actor is who a bulk action is recorded as: the principal, or on a
// cluster-token call the caller the forwarding server names.
func actor(r *http.Request, p Principal) string {
	if v := r.URL.Query().Get(apiv1.ParamOnBehalfOf); p.Cluster && v != "" {
		return cut(v, 128)
	}
	return p.Name
}

// cut bounds s to n bytes, dropping a rune split at the end.
func cut(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "")
	}
	return s
}

// outcomes are the per-region parts of a fan-out as the API answers them:
// a region that did not answer carries its error.
func outcomes(parts []federation.RegionPart) []apiv1.RegionOutcome {
	out := make([]apiv1.RegionOutcome, len(parts))
	for i, p := range parts {
		out[i] = apiv1.RegionOutcome{Region: p.Region, Count: p.Count}
		if p.Err != nil {
			b := toAPIError(p.Err).body()
			out[i].Error = &b
		}
	}
	return out
}

// maxDLQOffset bounds GET /v1/dlq's offset= (ten pages of the largest
// limit); the cursor pages on without a bound.
const maxDLQOffset = 10 * federation.MaxDLQLimit

// parseDLQQuery reads GET /v1/dlq's parameters; a scoped principal lists
// its own tenant's (tenant= naming another is 403). An unknown parameter is refused rather
// than ignored: a typo (typ=) must not turn a filtered listing into a full
// one.
func parseDLQQuery(raw string, p Principal) (federation.DLQQuery, error) {
	q := federation.DLQQuery{Limit: 100}
	v, err := parseQuery(raw, "type", "tenant", "region", "limit", "offset", "cursor")
	if err != nil {
		return q, err
	}
	if s := v.Get("limit"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > federation.MaxDLQLimit {
			return q, &task.FieldError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d", federation.MaxDLQLimit)}
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
	q.Tenant, err = p.scope(v.Get("tenant"), "list")
	return q, err
}

// parseQuery parses a query string of a listing and refuses a parameter
// not in allowed, naming it (a typo would otherwise widen the listing).
func parseQuery(raw string, allowed ...string) (url.Values, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, &task.FieldError{Field: badQueryParam(raw), Msg: "malformed query: " + err.Error()}
	}
	for k := range v {
		if !slices.Contains(allowed, k) {
			return nil, &task.FieldError{Field: k, Msg: "unknown parameter (" + strings.Join(allowed, ", ") + ")"}
		}
	}
	return v, nil
}

// badQueryParam names the parameter of a query string that does not
// unescape ("" when it is the name itself).
func badQueryParam(raw string) string {
	for _, kv := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return ""
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return name
		}
	}
	return ""
}

// joinTrace makes the request's W3C trace (a traceparent header) the trace
// of the specs that name none, and its span the parent of their submit
// spans. The trace id is not part of a spec's idempotency hash, so a retry
// under another trace is still the same task.
func joinTrace(r *http.Request, specs ...*task.Spec) context.Context {
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

package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// APIConfig configures the HTTP API.
type APIConfig struct {
	Auth       *Auth
	MaxPayload int // bytes of one task's payload (default 1 MiB): 413 above
	Gatherer   prometheus.Gatherer
	// Ready reports readiness beyond Redis (etcd reachable, ...).
	Ready func(ctx context.Context) error
	// Pools are this region's pool names (hand-off receivers check them).
	Pools []string
	// Schedules serves /v1/schedules (nil: 503, this server runs none).
	Schedules Schedules
	// DAGs serves /v1/dags (nil: 503).
	DAGs DAGs
}

// API serves DESIGN §6's HTTP API for one server.
type API struct {
	n   *Node
	cfg APIConfig
	mux *http.ServeMux
}

// NewAPI builds the handler.
func NewAPI(n *Node, cfg APIConfig) *API {
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = 1 << 20
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	a := &API{n: n, cfg: cfg, mux: http.NewServeMux()}
	a.route("POST /v1/tasks", RoleSubmitter, a.submit)
	a.route("POST /v1/tasks/batch", RoleSubmitter, a.submitBatch)
	a.route("GET /v1/tasks/{id}", RoleSubmitter, a.get)
	a.route("GET /v1/tasks/{id}/trail", RoleSubmitter, a.trail)
	a.route("POST /v1/tasks/{id}/cancel", RoleOperator, a.act(OpCancel))
	a.route("POST /v1/tasks/{id}/replay", RoleOperator, a.act(OpReplay))
	a.route("POST /v1/tasks/{id}/priority", RoleOperator, a.act(OpPriority))
	a.route("POST /v1/tasks/cancel", RoleOperator, a.bulkCancel)
	a.route("GET /v1/dlq", RoleSubmitter, a.dlq)
	a.route("GET /v1/regions", RoleSubmitter, a.regions)
	a.route("POST /v1/regions/{region}/drain", RoleOperator, a.drain)
	a.route("POST /v1/placement/explain", RoleSubmitter, a.explain)
	a.route("GET /v1/events", RoleSubmitter, a.events)
	a.route("POST /v1/internal/handoff", RoleAdmin, a.handoff)
	a.route("POST /v1/internal/handoff/batch", RoleAdmin, a.handoffBatch)
	a.scheduleRoutes()
	a.dagRoutes()
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	a.mux.HandleFunc("GET /readyz", a.readyz)
	a.mux.HandleFunc("GET /{$}", dashboard)
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: 404, code: apiv1.CodeNotFound, msg: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	return a
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

type handler func(w http.ResponseWriter, r *http.Request, p Principal) error

// route registers one endpoint behind authentication and a role check, and
// counts it.
func (a *API) route(pattern string, need Role, h handler) {
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: 200}
		defer func() { a.n.metrics.requests.WithLabelValues(pattern, strconv.Itoa(rec.code)).Inc() }()
		p, ok := a.cfg.Auth.Authenticate(r)
		if !ok {
			rec.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
			writeError(rec, &apiError{status: 401, code: apiv1.CodeUnauthorized, msg: "missing or unknown bearer token"})
			return
		}
		if strings.HasPrefix(pattern, "POST /v1/internal/") && !p.Cluster && a.cfg.Auth != nil && a.cfg.Auth.Enabled {
			writeError(rec, &apiError{status: 403, code: apiv1.CodeForbidden, msg: "the hand-off endpoint needs the cluster token"})
			return
		}
		if p.Role < need {
			writeError(rec, &apiError{status: 403, code: apiv1.CodeForbidden, msg: "this token's role may not do that"})
			return
		}
		r = r.WithContext(withHops(r.Context(), hops(r)))
		if err := h(rec, r, p); err != nil {
			writeError(rec, err)
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(c int) { s.code = c; s.ResponseWriter.WriteHeader(c) }
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// apiError is an error with its HTTP shape.
type apiError struct {
	status     int
	code, msg  string
	field      string
	retryAfter time.Duration
	expl       *apiv1.Explanation
	peer       *apiv1.Error
}

func (e *apiError) Error() string { return e.msg }

// toAPIError is the one mapping of internal errors to HTTP statuses.
func toAPIError(err error) *apiError {
	var ae *apiError
	var fe *task.FieldError
	var te *task.TransitionError
	var pe *PlacementError
	var peer *PeerError
	var mbe *http.MaxBytesError
	var we *apiv1.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &we):
		return &apiError{status: statusOf(we.Code), code: we.Code, msg: we.Message, field: we.Field,
			retryAfter: time.Duration(we.RetryAfterSeconds) * time.Second, expl: we.Explanation}
	case errors.As(err, &mbe):
		return &apiError{status: 413, code: apiv1.CodeTooLarge, msg: fmt.Sprintf("request body larger than %d bytes", mbe.Limit)}
	case errors.As(err, &fe):
		if fe.Field == "payload" && strings.HasPrefix(fe.Msg, "larger than") {
			return &apiError{status: 413, code: apiv1.CodeTooLarge, msg: fe.Error(), field: "payload"}
		}
		return &apiError{status: 400, code: apiv1.CodeInvalid, msg: fe.Msg, field: fe.Field}
	case errors.Is(err, task.ErrBadID):
		return &apiError{status: 404, code: apiv1.CodeNotFound, msg: "no such task (malformed id)", field: "id"}
	case errors.Is(err, task.ErrNotFound):
		return &apiError{status: 404, code: apiv1.CodeNotFound, msg: "no such task"}
	case errors.Is(err, queue.ErrDAGNotFound):
		return &apiError{status: 404, code: apiv1.CodeNotFound, msg: "no such DAG run", field: "id"}
	case errors.Is(err, task.ErrIdempotencyConflict):
		return &apiError{status: 409, code: apiv1.CodeConflict, msg: "idempotency key already used with a different spec", field: "idempotency_key"}
	case errors.As(err, &te):
		return &apiError{status: 409, code: apiv1.CodeFailedPrecond, msg: te.Error()}
	case errors.As(err, &pe):
		ex := toExplanation(pe.Explanation)
		if pe.Saturated {
			return &apiError{status: 429, code: apiv1.CodeSaturated, msg: pe.Error(), retryAfter: pe.RetryAfter, expl: &ex}
		}
		return &apiError{status: 422, code: apiv1.CodeUnplaceable, msg: pe.Error(), expl: &ex}
	case errors.Is(err, ErrRegionUnavailable):
		return &apiError{status: 503, code: apiv1.CodeUnavailable, msg: err.Error(), retryAfter: 5 * time.Second}
	case errors.As(err, &peer):
		if peer.Status >= 400 && peer.Status < 600 && peer.Body.Code != "" {
			b := peer.Body
			return &apiError{status: peer.Status, code: b.Code, msg: b.Message, field: b.Field, peer: &b}
		}
		return &apiError{status: 502, code: apiv1.CodeUnavailable, msg: err.Error()}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &apiError{status: 503, code: apiv1.CodeUnavailable, msg: err.Error(), retryAfter: time.Second}
	}
	return &apiError{status: 500, code: apiv1.CodeInternal, msg: err.Error()}
}

// statusOf is the HTTP status of an API error code.
func statusOf(code string) int {
	switch code {
	case apiv1.CodeInvalid:
		return http.StatusBadRequest
	case apiv1.CodeUnauthorized:
		return http.StatusUnauthorized
	case apiv1.CodeForbidden:
		return http.StatusForbidden
	case apiv1.CodeNotFound:
		return http.StatusNotFound
	case apiv1.CodeConflict, apiv1.CodeFailedPrecond:
		return http.StatusConflict
	case apiv1.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case apiv1.CodeUnplaceable:
		return http.StatusUnprocessableEntity
	case apiv1.CodeSaturated:
		return http.StatusTooManyRequests
	case apiv1.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (e *apiError) body() apiv1.Error {
	if e.peer != nil {
		return *e.peer
	}
	b := apiv1.Error{Code: e.code, Message: e.msg, Field: e.field, Explanation: e.expl}
	if e.retryAfter > 0 {
		b.RetryAfterSeconds = int((e.retryAfter + time.Second - 1) / time.Second)
	}
	return b
}

func writeError(w http.ResponseWriter, err error) {
	e := toAPIError(err)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.status, apiv1.ErrorBody{Error: e.body()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// decode reads a JSON body strictly: size-limited, unknown fields named.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return &task.FieldError{Field: "", Msg: "empty body; a JSON object is required"}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &task.FieldError{Field: te.Field, Msg: "must be " + te.Type.String()}
		}
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return &task.FieldError{Field: strings.Trim(f, `"`), Msg: "unknown field"}
		}
		return &task.FieldError{Msg: "invalid JSON: " + strings.TrimPrefix(msg, "json: ")}
	}
	if dec.More() {
		return &task.FieldError{Msg: "unexpected data after the JSON object"}
	}
	return nil
}

func hops(r *http.Request) int {
	n, _ := strconv.Atoi(r.Header.Get(headerForwarded))
	return n
}

// readSpec reads one spec body and applies the principal's tenant.
func (a *API) readSpec(w http.ResponseWriter, r *http.Request, p Principal) (*task.Spec, error) {
	r.Body = http.MaxBytesReader(w, r.Body, int64(a.cfg.MaxPayload)+64<<10)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	sp, err := task.DecodeSpec(b)
	if err != nil {
		return nil, err
	}
	return sp, a.applyTenant(sp, p)
}

func (a *API) applyTenant(sp *task.Spec, p Principal) error {
	if p.Tenant != "" {
		if sp.Tenant != "" && sp.Tenant != p.Tenant {
			return &apiError{status: 403, code: apiv1.CodeForbidden, msg: "this token may only submit for tenant " + p.Tenant, field: "tenant"}
		}
		sp.Tenant = p.Tenant
	}
	if len(sp.Payload) > a.cfg.MaxPayload {
		return &apiError{status: 413, code: apiv1.CodeTooLarge, msg: fmt.Sprintf("payload larger than %d bytes", a.cfg.MaxPayload), field: "payload"}
	}
	return nil
}

func respOf(o Outcome) *apiv1.SubmitResponse {
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
	o := a.n.Submit(r.Context(), []*task.Spec{sp}, hops(r) > 0)[0]
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

// MaxBatch is the most specs one batch call takes.
const MaxBatch = 1000

func (a *API) submitBatch(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req apiv1.BatchRequest
	if err := decode(w, r, int64(MaxBatch)*int64(a.cfg.MaxPayload/16+4<<10)+(64<<20), &req); err != nil {
		return err
	}
	if len(req.Tasks) == 0 || len(req.Tasks) > MaxBatch {
		return &apiError{status: 400, code: apiv1.CodeInvalid, msg: fmt.Sprintf("a batch holds 1 to %d tasks", MaxBatch), field: "tasks"}
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
			resp.Results[i] = apiv1.BatchItem{Status: e.status, Error: &b}
			continue
		}
		specs = append(specs, sp)
		idx = append(idx, i)
	}
	for k, o := range a.n.Submit(r.Context(), specs, hops(r) > 0) {
		i := idx[k]
		if o.Err != nil {
			e := toAPIError(o.Err)
			b := e.body()
			if b.Field != "" {
				b.Field = fmt.Sprintf("tasks[%d].%s", i, b.Field)
			}
			resp.Results[i] = apiv1.BatchItem{Status: e.status, Error: &b}
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
	t, err := a.n.Get(r.Context(), r.PathValue("id"), hops(r))
	if err != nil {
		return err
	}
	if !p.sees(t.Tenant) {
		return task.ErrNotFound // 404, so ids of other tenants do not leak
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// visible checks the principal may see the task (404 otherwise).
func (a *API) visible(ctx context.Context, p Principal, id string, h int) error {
	if p.Tenant == "" {
		return nil
	}
	t, err := a.n.Get(ctx, id, h)
	if err != nil {
		return err
	}
	if !p.sees(t.Tenant) {
		return task.ErrNotFound
	}
	return nil
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

func (a *API) act(op TaskOp) handler {
	return func(w http.ResponseWriter, r *http.Request, p Principal) error {
		id := r.PathValue("id")
		prio := 0
		if op == OpPriority {
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
		st, err := a.n.Act(r.Context(), op, id, prio, p.Name, hops(r))
		if err != nil {
			return err
		}
		switch op {
		case OpCancel:
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
	if p.Tenant != "" {
		if req.Tenant != "" && req.Tenant != p.Tenant {
			return &apiError{status: 403, code: apiv1.CodeForbidden, msg: "this token may only act on tenant " + p.Tenant, field: "tenant"}
		}
		req.Tenant = p.Tenant
	}
	f := queue.Filter{Type: req.Type, Tenant: req.Tenant, State: req.State}
	resp, err := a.n.bulkCancel(r.Context(), f, req.Region, actor(r, p), hops(r))
	if err != nil {
		return err
	}
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
	resp, err := a.n.deadLetters(r.Context(), q, hops(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (a *API) regions(w http.ResponseWriter, _ *http.Request, _ Principal) error {
	resp := apiv1.RegionsResponse{GlobalView: a.n.view.Connected(), Regions: []apiv1.RegionStatus{}}
	for _, ri := range a.n.view.Regions() {
		rs := apiv1.RegionStatus{Name: ri.Region, API: ri.API, Leader: ri.Leader, Healthy: ri.Healthy, Stale: ri.Stale,
			UpdatedAt: ri.UpdatedAt, Servers: a.n.view.Servers(ri.Region)}
		for _, p := range ri.Pools {
			rs.Pools = append(rs.Pools, apiv1.PoolStatus{
				Name: p.Name, Tags: p.Tags, Slots: p.Slots, Workers: p.Workers, Running: p.Running, Ready: p.Ready,
				QueueCapacity: p.QueueCapacity, Utilisation: p.Utilisation(), QueueFill: p.QueueFill(),
				PricePerSlotHour: p.PricePerSlotHour, Spot: p.Spot, Discount: p.Discount, Paused: p.Paused,
			})
		}
		resp.Regions = append(resp.Regions, rs)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (a *API) drain(w http.ResponseWriter, r *http.Request, _ Principal) error {
	name := r.PathValue("region")
	if name != a.n.cfg.Region {
		if hops(r) > 0 {
			return &apiError{status: 404, code: apiv1.CodeNotFound, msg: "region " + name + " is not served here"}
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
	out := apiv1.Explanation{Candidates: make([]apiv1.Candidate, 0, len(ex.Candidates))}
	for _, c := range ex.Candidates {
		ac := apiv1.Candidate{Region: c.Region, Pool: c.Pool, Rejected: string(c.Reason), PricePerSlotHour: c.Price,
			ExpectedSeconds: c.Duration.Seconds(), EstimateSource: string(c.DurationSource), Observations: c.Observations,
			SpreadSeconds: c.Spread.Seconds(), BaseCost: c.BaseCost, Penalty: c.Penalty, CrossRegion: c.CrossRegion,
			Score: c.Cost, QueueFill: c.Fill, Chosen: c.Won}
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

func (a *API) events(w http.ResponseWriter, r *http.Request, _ Principal) error {
	q := r.URL.Query()
	if reg := q.Get("region"); reg != "" && reg != a.n.cfg.Region {
		if hops(r) > 0 {
			return &apiError{status: 404, code: apiv1.CodeNotFound, msg: "region " + reg + " is not served here"}
		}
		var resp apiv1.EventsResponse
		path := "/v1/events?" + q.Encode()
		if err := a.n.Proxy(r.Context(), reg, http.MethodGet, path, nil, &resp); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	wait := 10 * time.Second
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Minute {
			return &task.FieldError{Field: "wait", Msg: "a duration up to 1m"}
		}
		wait = d
	}
	var after []string
	if v := q.Get("after"); v != "" {
		after = strings.Split(v, ",")
	} else {
		// Start at the newest entry so a first call returns only new events.
		after = nil
	}
	evs, next, err := a.n.store.Events(r.Context(), after, 200, max(wait, time.Millisecond))
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []task.Event{}
	}
	writeJSON(w, http.StatusOK, apiv1.EventsResponse{Region: a.n.cfg.Region, Events: evs, Next: strings.Join(next, ",")})
	return nil
}

func (a *API) handoff(w http.ResponseWriter, r *http.Request, _ Principal) error {
	var h apiv1.HandOff
	if err := decode(w, r, int64(a.cfg.MaxPayload)+(1<<20), &h); err != nil {
		return err
	}
	resp, err := a.n.Accept(r.Context(), h, a.knownPool)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if !resp.Accepted {
		status = http.StatusUnprocessableEntity
		writeJSON(w, status, apiv1.ErrorBody{Error: apiv1.Error{Code: apiv1.CodeUnplaceable, Message: resp.Reason}})
		return nil
	}
	writeJSON(w, status, resp)
	return nil
}

// knownPool reports whether pool is one of this region's (hand-off
// receivers take tasks only into their own pools).
func (a *API) knownPool(pool string) bool {
	for _, p := range a.cfg.Pools {
		if p == pool {
			return true
		}
	}
	return false
}

// handoffBatch serves POST /v1/internal/handoff/batch (apiv1.HandOffBatch).
//
// The request's shape is checked first, for every item: JSON, known
// fields and their types, 1 to MaxBatch items, no id twice. A fault there
// is a 400 naming the field (items[i].id, ...) and nothing is stored.
// Then each item's content (id, pool, spec) is judged on its own, as the
// single-item endpoint judges it: a faulty item is refused in its result,
// with the status and error that endpoint would give and the field named
// items[i]...; the others are accepted (or found already held), all in one
// store call. A store failure fails the whole request (5xx): the sender
// retries every item, and ids stored before the failure are answered
// "accepted" then.
func (a *API) handoffBatch(w http.ResponseWriter, r *http.Request, _ Principal) error {
	// Items stay raw here so that a fault in one can be named by its place.
	var req struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := decode(w, r, int64(MaxBatch)*int64(a.cfg.MaxPayload/16+4<<10)+(64<<20), &req); err != nil {
		return err
	}
	if len(req.Items) == 0 || len(req.Items) > MaxBatch {
		return &task.FieldError{Field: "items", Msg: fmt.Sprintf("a batch holds 1 to %d hand-offs", MaxBatch)}
	}
	hs := make([]apiv1.HandOff, len(req.Items))
	first := make(map[string]int, len(hs))
	for i, raw := range req.Items {
		if err := decodeHandOff(raw, &hs[i]); err != nil {
			err.Field = strings.TrimSuffix(fmt.Sprintf("items[%d].%s", i, err.Field), ".")
			return err
		}
		if j, ok := first[hs[i].ID]; ok {
			return &task.FieldError{Field: fmt.Sprintf("items[%d].id", i), Msg: fmt.Sprintf("repeats items[%d].id", j)}
		}
		first[hs[i].ID] = i
	}
	res, err := a.n.acceptMany(r.Context(), hs, a.knownPool)
	if err != nil {
		return err
	}
	resp := apiv1.HandOffBatchResponse{Results: make([]apiv1.HandOffItem, len(hs))}
	for i, x := range res {
		it := apiv1.HandOffItem{ID: hs[i].ID}
		if x.Err != nil {
			st, e := handOffRefusal(i, x.Err)
			it.Status, it.Error = st, &e
			resp.Refused++
		} else {
			it.Status, it.Accepted, it.State, it.Duplicate, it.Canceled = http.StatusOK, true, string(x.State), x.Duplicate, x.Canceled
			resp.Accepted++
		}
		resp.Results[i] = it
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// decodeHandOff reads one item of a hand-off batch strictly; the error's
// field is relative to the item.
func decodeHandOff(raw json.RawMessage, h *apiv1.HandOff) *task.FieldError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(h)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return &task.FieldError{Msg: "must be a JSON object {id, pool, spec}"}
	case errors.As(err, &te):
		return &task.FieldError{Field: te.Field, Msg: "must be " + te.Type.String()}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &task.FieldError{Field: strings.Trim(f, `"`), Msg: "unknown field"}
	}
	return &task.FieldError{Msg: "invalid hand-off: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// handOffRefusal is the status and error of item i of a batch that is not
// accepted: what the single-item endpoint answers, the field named by the
// item's place.
func handOffRefusal(i int, err error) (int, apiv1.Error) {
	item := fmt.Sprintf("items[%d]", i)
	var rf *refusal
	switch {
	case errors.As(err, &rf):
		e := apiv1.Error{Code: apiv1.CodeUnplaceable, Message: rf.reason}
		if rf.field != "" {
			e.Field = item + "." + rf.field
		}
		return http.StatusUnprocessableEntity, e
	case errors.Is(err, task.ErrBadID):
		return http.StatusBadRequest, apiv1.Error{Code: apiv1.CodeInvalid, Message: err.Error(), Field: item + ".id"}
	}
	// The spec's own faults (task.FieldError: 400, or 413 for its payload).
	e := toAPIError(err)
	b := e.body()
	b.Field = strings.TrimSuffix(item+".spec."+b.Field, ".")
	return e.status, b
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var problems []string
	if err := a.n.store.Ping(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	if a.cfg.Ready != nil {
		if err := a.cfg.Ready(ctx); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if !a.n.view.Connected() {
		// Not fatal: the region keeps scheduling its own work on its last view.
		w.Header().Set("X-Ax-Global-View", "stale")
	}
	if len(problems) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "problems": problems, "global_view": a.n.view.Connected()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true, "region": a.n.cfg.Region, "global_view": a.n.view.Connected()})
}

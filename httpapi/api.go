package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/httpapi/batches"
	"github.com/ax-sched/ax/httpapi/dags"
	"github.com/ax-sched/ax/httpapi/dashboard"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/httpapi/handoff"
	"github.com/ax-sched/ax/httpapi/history"
	"github.com/ax-sched/ax/httpapi/results"
	"github.com/ax-sched/ax/httpapi/schedules"
	"github.com/ax-sched/ax/httpapi/stream"
	"github.com/ax-sched/ax/httpapi/workers"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// Config configures the HTTP API.
type Config struct {
	Auth       *Auth
	MaxPayload int // bytes of one task's payload (default 64 KiB): 413 above
	// Gatherer serves GET /metrics (default prometheus.DefaultGatherer);
	// Registerer, when set, gets the API's own metrics.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	// Ready reports readiness beyond Redis (the regional etcd reachable):
	// an error makes /readyz answer 503.
	Ready func(ctx context.Context) error
	// GlobalEtcd reports whether the global etcd answers (nil: not asked).
	// Its loss does not make the server unready — the region schedules its
	// own work on its last view — but /readyz says so, from the same probe
	// as ax_global_etcd_healthy, so the two agree.
	GlobalEtcd func() error
	// Pools are this region's pool names (hand-off receivers check them).
	Pools []string
	// Schedules serves /v1/schedules (nil: 503, this server runs none).
	Schedules Schedules
	// DAGs serves /v1/dags (nil: 503).
	DAGs DAGs
	// Batches serves /v1/batches (nil: 503).
	Batches batches.Batches
	// LongPolls caps concurrent /v1/events long-polls on this server
	// (default 8), LongPollsPerTenant those of one tenant (default 2).
	LongPolls, LongPollsPerTenant int
	// Logger gets the causes of 5xx answers (default: discarded).
	Logger *slog.Logger
	// Quota is a tenant's submit rate (tasks/s, 0: no limit) and burst, a
	// bucket in the region's Redis shared by its servers; nil: no quotas.
	// Only tokens of one tenant are limited.
	Quota func(tenant string) (perSecond float64, burst int)
	// MemoryReserve is the share of the region's Redis maxmemory kept for
	// work already accepted (0: off), Memory what reads how full it is;
	// either nil: off (endpoint.Reserve says what is refused).
	MemoryReserve func() float64
	Memory        func(ctx context.Context) (MemoryUse, error)
	// Reserve, when set, is the memory reserve to use instead of one made
	// of MemoryReserve and Memory: the one the federation's schedule slots
	// and hand-offs received ask too (federation.Config.MemoryAdmit).
	Reserve *Reserve
	// BatchMaxItems and BatchMaxBytes cap one POST /v1/tasks/batch
	// (defaults: apiv1.MaxBatch and 16 MiB).
	BatchMaxItems int
	BatchMaxBytes int64
	// PublicDetails serves /metrics and /readyz's details without a token;
	// off (and auth on), /metrics needs a token of every tenant and /readyz
	// tells others only whether the server is ready.
	PublicDetails bool
	// Profiling serves /debug/pprof/ to an admin token of every tenant
	// (with auth off, to anyone): profiles show the server's code paths.
	Profiling bool
	// Workers serves the remote worker protocol.
	Workers WorkerConfig
	// MaxHeaderBytes > 0 answers a request whose request line and headers
	// are over it 431 headers_too_large (field: the largest header); serve
	// the API with http.Server.MaxHeaderBytes HeaderReadLimit(it).
	MaxHeaderBytes int
}

// MemoryUse is how full the region's Redis is (Config.Memory).
type MemoryUse = endpoint.MemoryUse

// Reserve is the region's memory reserve (Config.Reserve).
type Reserve = endpoint.Reserve

// NewReserve is endpoint.NewReserve: share (0: off) and read are asked at
// each request.
func NewReserve(share func() float64, read func(context.Context) (MemoryUse, error)) *Reserve {
	return endpoint.NewReserve(share, read)
}

// WorkerLimits bounds the remote worker protocol (config remote_workers);
// zero values take the defaults.
type WorkerLimits = workers.Limits

// WorkerStore is where the worker protocol claims and records tasks and
// keeps its workers' registrations: the region's store and its Redis
// (nil Claimer: the protocol answers 503).
type WorkerStore struct {
	Claimer   workers.Claimer
	Recorder  workers.Recorder
	Reader    workers.Reader
	Redis     redis.UniversalClient
	Heartbeat time.Duration // the region's lease.heartbeat
}

// WorkerConfig is the worker protocol's part of the API's config.
type WorkerConfig struct {
	Limits WorkerLimits
	Store  WorkerStore
}

func (wc WorkerConfig) with(n *federation.Node, cfg Config) workers.Config {
	region := ""
	if n != nil {
		region = n.Region()
	}
	return workers.Config{Limits: wc.Limits, Region: region, Pools: cfg.Pools, Claimer: wc.Store.Claimer,
		Recorder: wc.Store.Recorder, Reader: wc.Store.Reader, Redis: wc.Store.Redis, Heartbeat: wc.Store.Heartbeat,
		Registerer: cfg.Registerer, Logger: cfg.Logger}
}

// API serves docs/architecture.md §7's HTTP API for one server.
type API struct {
	cfg      Config
	mux      *http.ServeMux
	routes   []string // every pattern registered, for the OpenAPI test
	requests *prometheus.CounterVec
	fed      Readiness
	tasks    *taskHandlers
	streams  *stream.Streams
	fails    *failLog // the causes of hidden 5xx answers
	history  *history.Ring
}

// History is the ring GET /v1/history answers from; the server runs its
// loop (Ring.Run) for as long as it serves.
func (a *API) History() *history.Ring { return a.history }

// Readiness is what GET /readyz asks of the federation (each family of
// endpoints asks for its own: tasks.go's interfaces and the
// sub-packages'); *federation.Node implements them all.
type Readiness interface {
	// Region is this server's region.
	Region() string
	// View is the federation's global view.
	View() *view.View
	// Ping reports whether the region's store answers.
	Ping(ctx context.Context) error
}

// New builds the API of the server whose federation node is n.
func New(n *federation.Node, cfg Config) *API {
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.BatchMaxItems <= 0 || cfg.BatchMaxItems > apiv1.MaxBatch {
		cfg.BatchMaxItems = apiv1.MaxBatch
	}
	if cfg.BatchMaxBytes <= 0 {
		cfg.BatchMaxBytes = apiv1.DefaultBatchMaxBytes
	}
	a := &API{fed: n, cfg: cfg, mux: http.NewServeMux(), fails: newFailLog(cfg.Logger),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_http_requests_total",
			Help: "API requests by route and status code."}, []string{"route", "code"})}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(a.requests)
	}
	clusterToken := ""
	if cfg.Auth != nil {
		clusterToken = cfg.Auth.ClusterToken
	}
	region := ""
	if n != nil {
		region = n.Region()
	}
	reserve := cfg.Reserve
	if reserve == nil {
		reserve = endpoint.NewReserve(cfg.MemoryReserve, cfg.Memory)
	}
	quotas := endpoint.NewQuotas(cfg.Quota, n, reserve)
	a.tasks = newTaskHandlers(n, cfg, quotas, &refusalMeter{gather: cfg.Gatherer, region: region})
	a.streams = stream.New(stream.Config{Fed: n, Tokens: cfg.Auth, Regions: a.tasks.regionsResponse, Task: a.tasks.getFor,
		LongPolls: cfg.LongPolls, LongPollsPerTenant: cfg.LongPollsPerTenant, ClusterToken: clusterToken})
	a.history = history.New(history.Config{Look: historyLook(n, a.tasks, cfg.Gatherer)})
	for _, family := range [][]endpoint.Route{
		a.tasks.routes(),
		a.history.Routes(),
		a.streams.Routes(),
		results.New(results.Config{Task: a.tasks.getFor, LongPolls: cfg.LongPolls, LongPollsPerTenant: cfg.LongPollsPerTenant}).Routes(),
		handoff.New(handoff.Config{Receiver: n, Enqueuer: n, MaxPayload: cfg.MaxPayload, Pools: cfg.Pools, Logger: cfg.Logger}).Routes(),
		schedules.New(schedules.Config{Scheduler: cfg.Schedules, Fed: n, Quotas: quotas, MaxPayload: cfg.MaxPayload}).Routes(),
		dags.New(dags.Config{Runs: cfg.DAGs, Fed: n, Quotas: quotas, MaxPayload: cfg.MaxPayload}).Routes(),
		batches.New(batches.Config{Batches: cfg.Batches, Submitter: n, Fed: n, Quotas: quotas, MaxPayload: cfg.MaxPayload}).Routes(),
		workers.New(cfg.Workers.with(n, cfg)).Routes(),
	} {
		for _, rt := range family {
			a.route(rt.Pattern, rt.Role, rt.Handle)
		}
	}
	a.handle("GET /metrics", MetricsHandler(cfg.Auth, cfg.PublicDetails, cfg.Gatherer))
	if cfg.Profiling {
		a.handle("GET /debug/pprof/", profiles(cfg.Auth))
	}
	a.handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }))
	a.handle("GET /readyz", http.HandlerFunc(a.readyz))
	dashboard.Register(registrar(a.handle))
	for _, d := range []struct {
		pattern string
		doc     []byte
	}{{"GET /v1/openapi.json", openAPI}, {"GET /v1/openapi-internal.json", openAPIInternal}} {
		doc := d.doc
		a.handle(d.pattern, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
		}))
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := a.allowed(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			endpoint.WriteError(w, &endpoint.Error{Code: apiv1.CodeMethodNotAllowed,
				Msg: r.Method + " is not allowed on " + r.URL.Path + " (" + strings.Join(allow, ", ") + ")"})
			return
		}
		endpoint.WriteError(w, &endpoint.Error{Code: apiv1.CodeNotFound, Msg: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	return a
}

// MetricsHandler serves g's metrics: to anyone with publicDetails or auth
// off, else only to a token of every tenant (tenant ""), as their labels
// name every tenant (and their schedules and spend). A server's /metrics
// and a worker's --metrics both use it.
func MetricsHandler(auth *Auth, publicDetails bool, g prometheus.Gatherer) http.Handler {
	metrics := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !publicDetails && !admitted(w, r, auth, func(p Principal) bool { return p.Tenant == "" && p.Role != RoleWorker },
			"metrics name every tenant: they need a token of every tenant (tenant \"\")") {
			return
		}
		metrics.ServeHTTP(w, r)
	})
}

// admitted authenticates r outside the router, for an endpoint whose
// answer shows every tenant: it answers 401 for a bad or missing token and
// 403 with why when allow refuses the token, and reports whether r may go
// on. With auth off every request is admitted.
func admitted(w http.ResponseWriter, r *http.Request, auth *Auth, allow func(Principal) bool, why string) bool {
	p, aerr := auth.authenticate(r)
	if aerr != nil {
		unauthorized(&statusRecorder{ResponseWriter: w, code: 200}, r, aerr)
		return false
	}
	MarkTrusted(r.Context())
	if !allow(p) {
		endpoint.WriteError(w, &endpoint.Error{Code: apiv1.CodeForbidden, Field: "Authorization", Msg: why})
		return false
	}
	return true
}

// allowed are the methods some route serves r's path with, r's own
// excepted (HEAD where GET is, as the mux serves it); none: the path is no
// endpoint.
func (a *API) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := *r
		probe.Method = m
		if _, pattern := a.mux.Handler(&probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

// ServeHTTP refuses a request whose headers are over Config.MaxHeaderBytes
// with the JSON error (the server reads up to HeaderReadLimit of them), then
// routes it.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.cfg.MaxHeaderBytes > 0 {
		if e := tooManyHeaderBytes(r, a.cfg.MaxHeaderBytes); e != nil {
			// Its body, if any, is not read: the connection ends here.
			w.Header().Set("Connection", "close")
			endpoint.WriteError(w, e)
			return
		}
	}
	a.mux.ServeHTTP(w, r)
}

// handle registers an endpoint that authenticates on its own or not at all
// (metrics, health, the dashboard's files, the OpenAPI documents) and
// notes its pattern with the routes', so that routes lists every pattern
// the API serves.
func (a *API) handle(pattern string, h http.Handler) {
	a.routes = append(a.routes, pattern)
	a.mux.Handle(pattern, h)
}

// registrar lets a package register its endpoints through API.handle.
type registrar func(pattern string, h http.Handler)

func (r registrar) Handle(pattern string, h http.Handler) { r(pattern, h) }

// route registers one endpoint behind authentication and a role check, and
// counts it. A handler's error is answered through endpoint.WriteError, the one
// mapping of errors to HTTP.
func (a *API) route(pattern string, need Role, h endpoint.Handler) {
	a.routes = append(a.routes, pattern)
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		tracing.NameRoute(r.Context(), pattern)
		rec := &statusRecorder{ResponseWriter: w, code: 200}
		defer func() { a.requests.WithLabelValues(pattern, strconv.Itoa(rec.code)).Inc() }()
		p, aerr := a.principal(pattern, r)
		if aerr != nil {
			unauthorized(rec, r, aerr)
			return
		}
		MarkTrusted(r.Context())
		if strings.HasPrefix(pattern, "POST /v1/internal/") && !p.Cluster && a.cfg.Auth != nil && a.cfg.Auth.Enabled {
			endpoint.WriteError(rec, &endpoint.Error{Code: apiv1.CodeForbidden, Field: "Authorization", Msg: "the hand-off endpoint needs the cluster token"})
			return
		}
		if p.Role == RoleWorker && need != RoleWorker {
			endpoint.WriteError(rec, &endpoint.Error{Code: apiv1.CodeForbidden, Field: "Authorization",
				Msg: "a worker token may call only the worker protocol (/v1/workers)"})
			return
		}
		if p.Role < need {
			endpoint.WriteError(rec, &endpoint.Error{Code: apiv1.CodeForbidden, Field: "Authorization", Msg: "this token's role may not do that"})
			return
		}
		r = r.WithContext(peer.WithHops(r.Context(), a.trustedHops(r, p)))
		if err := h(rec, r, p); err != nil {
			e := endpoint.ErrorOf(err)
			e.ScopeTo(p.Tenant)
			a.fails.failed(r.Context(), pattern, e)
			endpoint.WriteError(rec, e)
		}
	})
}

// unauthorized answers 401. A caller we do not know is not waited for: a
// request with a body (still being sent, perhaps slowly) is answered at
// once on the raw connection, which is then closed, the body never read.
func unauthorized(rec *statusRecorder, r *http.Request, e *endpoint.Error) {
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		if conn, buf, err := http.NewResponseController(rec.ResponseWriter).Hijack(); err == nil {
			body, _ := json.Marshal(apiv1.ErrorBody{Error: e.Body()})
			body = append(body, '\n')
			st := e.Status()
			retry := ""
			if s := e.RetryAfterSeconds(); s > 0 {
				retry = fmt.Sprintf("Retry-After: %d\r\n", s)
			}
			fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"+
				"WWW-Authenticate: Bearer realm=\"ax\"\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", st, http.StatusText(st), retry, len(body), body)
			_ = buf.Flush()
			rec.code = st
			// Half-close, then close a little later: closing with the
			// unread body in the socket would reset the connection before
			// the client reads its answer.
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			time.AfterFunc(500*time.Millisecond, func() { _ = conn.Close() })
			return
		}
	}
	rec.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
	endpoint.WriteError(rec, e)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(c int) { s.code = c; s.ResponseWriter.WriteHeader(c) }

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// maxHopHeader bounds the X-Ax-Forwarded value a server accepts; the
// federation stops forwarding well before it (federation.maxHops).
const maxHopHeader = 8

// trustedHops is how many servers the request has passed (X-Ax-Forwarded):
// a forwarded request is never routed again. Only another ax server (the
// cluster token) may say so: from any other token the header is ignored,
// so a submitter can neither skip routing (a keyed submit answered here
// twice) nor, with a negative count, make every region fan out again. With
// auth off (ax dev) every caller is trusted, but the count is still
// clamped to 0..maxHopHeader.
func (a *API) trustedHops(r *http.Request, p Principal) int {
	if a.cfg.Auth != nil && a.cfg.Auth.Enabled && !p.Cluster {
		return 0
	}
	n, err := strconv.Atoi(r.Header.Get(apiv1.HeaderForwarded))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, maxHopHeader)
}

// details reports whether r may see /metrics and /readyz's details: with
// PublicDetails or auth off anyone, else a caller with a token.
func (a *API) details(r *http.Request) bool {
	if a.cfg.PublicDetails {
		return true
	}
	p, err := a.cfg.Auth.authenticate(r)
	return err == nil && p.Role != RoleWorker
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var problems []string
	if err := a.fed.Ping(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	if a.cfg.Ready != nil {
		if err := a.cfg.Ready(ctx); err != nil {
			problems = append(problems, err.Error())
		}
	}
	view := a.fed.View()
	global := true
	if a.cfg.GlobalEtcd != nil {
		if err := a.cfg.GlobalEtcd(); err != nil {
			global = false
		}
	}
	if !view.Connected() || !global {
		// Not fatal: the region keeps scheduling its own work on its last view.
		w.Header().Set("X-Ax-Global-View", "stale")
	}
	if !a.details(r) {
		status := http.StatusOK
		if len(problems) > 0 {
			status = http.StatusServiceUnavailable
		}
		endpoint.WriteJSON(w, status, map[string]any{"ready": len(problems) == 0})
		return
	}
	if len(problems) > 0 {
		endpoint.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "problems": problems,
			"global_view": view.Connected(), "global_etcd": global})
		return
	}
	endpoint.WriteJSON(w, http.StatusOK, map[string]any{"ready": true, "region": a.fed.Region(),
		"global_view": view.Connected(), "global_etcd": global})
}

// principal authenticates r for pattern: the bearer token, or on GET
// /v1/stream without one, a stream ticket.
func (a *API) principal(pattern string, r *http.Request) (Principal, *endpoint.Error) {
	if pattern == stream.Route && a.cfg.Auth != nil && a.cfg.Auth.Enabled && r.Header.Get("Authorization") == "" {
		return a.streams.Redeem(r.URL.Query().Get("ticket"))
	}
	return a.cfg.Auth.authenticate(r)
}

package workers

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Limits bound the protocol on one server; zero values take the defaults.
type Limits struct {
	// MaxResultBytes bounds one result's JSON text (default
	// apiv1.DefaultMaxResultBytes).
	MaxResultBytes int
	// MaxWait bounds a claim's wait (default apiv1.DefaultWorkerMaxWait).
	MaxWait time.Duration
	// LongPolls caps the claims waiting at once on this server (default
	// apiv1.DefaultWorkerLongPolls), LongPollsPerToken those of one token
	// (default apiv1.DefaultWorkerLongPollsPerToken).
	LongPolls, LongPollsPerToken int
}

// Claimer claims tasks for remote workers and keeps them alive in their
// pool; *proxy.Proxy implements it.
type Claimer interface {
	Alive(ctx context.Context, w proxy.Worker) error
	Claim(ctx context.Context, r proxy.Request) (proxy.Claimed, error)
	Heartbeat(ctx context.Context, w proxy.Worker, held []apiv1.WorkerLease) ([]apiv1.WorkerStop, error)
	Lease() time.Duration
	// Again finds the tasks of a claim whose answer was lost (again).
	Again(ctx context.Context, w proxy.Worker, ids []string, since time.Time, holds func(id string) bool) ([]*task.Task, error)
}

// Recorder records what remote workers report; *proxy.Proxy implements it.
type Recorder interface {
	Record(ctx context.Context, os []apiv1.WorkerOutcome, results []string, maxResult int) (lost []bool, err error)
	Progress(ctx context.Context, id, lease string, p task.Progress) error
	Release(ctx context.Context, held []apiv1.WorkerLease) error
}

var (
	_ Claimer  = (*proxy.Proxy)(nil)
	_ Recorder = (*proxy.Proxy)(nil)
)

// Reader reads one stored task of the region; *store.Store implements it.
type Reader interface {
	Get(ctx context.Context, id string) (*task.Task, error)
}

// Config is what the protocol is served from. With Claimer nil the
// routes answer 503 (a server without a store).
type Config struct {
	Limits Limits
	// Region is this server's region; Pools its pools.
	Region string
	Pools  []string
	// Claimer and Recorder act in the region's store for the workers,
	// Reader reads it; Redis holds the workers' registrations, shared by
	// the region's servers.
	Claimer  Claimer
	Recorder Recorder
	Reader   Reader
	Redis    redis.UniversalClient
	// Heartbeat is how often workers should report (the region's lease.heartbeat).
	Heartbeat time.Duration
	// Registerer gets the protocol's metrics (nil: none).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Handlers serves the worker protocol.
type Handlers struct {
	cfg      Config
	sessions *sessions
	polls    *endpoint.LongPolls
	metrics  *metrics
	log      *slog.Logger
	beats    beats
}

// New builds the worker protocol's endpoints.
func New(cfg Config) *Handlers {
	l := &cfg.Limits
	if l.MaxResultBytes <= 0 {
		l.MaxResultBytes = apiv1.DefaultMaxResultBytes
	}
	if l.MaxWait <= 0 {
		l.MaxWait = apiv1.DefaultWorkerMaxWait
	}
	if l.LongPolls <= 0 {
		l.LongPolls = apiv1.DefaultWorkerLongPolls
	}
	if l.LongPollsPerToken <= 0 {
		l.LongPollsPerToken = apiv1.DefaultWorkerLongPollsPerToken
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = worker.DefaultHeartbeat
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handlers{cfg: cfg, polls: endpoint.NewLongPolls(l.LongPolls, l.LongPollsPerToken),
		metrics: newMetrics(cfg.Registerer), log: cfg.Logger}
	if cfg.Claimer != nil {
		h.sessions = &sessions{rdb: cfg.Redis, lease: cfg.Claimer.Lease()}
	}
	return h
}

// Routes are the worker protocol's endpoints. The router lets worker
// tokens call only these; each checks the token's scope itself.
func (h *Handlers) Routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "POST /v1/workers", Role: endpoint.RoleWorker, Handle: h.served(h.register)},
		{Pattern: "POST /v1/workers/{worker_id}/claim", Role: endpoint.RoleWorker, Handle: h.served(h.claim)},
		{Pattern: "POST /v1/workers/{worker_id}/report", Role: endpoint.RoleWorker, Handle: h.served(h.report)},
		{Pattern: "DELETE /v1/workers/{worker_id}", Role: endpoint.RoleWorker, Handle: h.served(h.leave)},
	}
}

// served answers 503 on a server without a store, and 403 to a token that
// is neither a worker's nor an admin's of every tenant.
func (h *Handlers) served(f func(http.ResponseWriter, *http.Request, scope) error) endpoint.Handler {
	return func(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
		if h.sessions == nil {
			return &endpoint.Error{Code: apiv1.CodeUnavailable, Msg: "this server does not serve the worker protocol", RetryAfter: 5 * time.Second}
		}
		sc, err := scopeOf(p)
		if err != nil {
			return err
		}
		return f(w, r, sc)
	}
}

// scope is what the caller may serve: a worker token's tenants, pools and
// types, or everything (an admin of every tenant: ax dev with auth off).
type scope struct {
	token string // the token's name: a registration is bound to it
	all   bool
	ws    endpoint.WorkerScope
}

func scopeOf(p endpoint.Principal) (scope, error) {
	switch {
	case p.Role == endpoint.RoleWorker && p.Worker != nil:
		return scope{token: p.Name, ws: *p.Worker}, nil
	case p.Role == endpoint.RoleAdmin && p.Tenant == "":
		return scope{token: p.Name, all: true}, nil
	}
	return scope{}, &endpoint.Error{Code: apiv1.CodeForbidden, Field: "Authorization",
		Msg: "the worker protocol needs a worker token (role worker) or an admin token of every tenant"}
}

func (s scope) tenant(t string) bool { return s.all || slices.Contains(s.ws.Tenants, t) }
func (s scope) pool(p string) bool   { return s.all || slices.Contains(s.ws.Pools, p) }
func (s scope) typ(t string) bool {
	return s.all || len(s.ws.Types) == 0 || slices.Contains(s.ws.Types, t)
}

// who counts the caller's long-polls: its token.
func (s scope) who() string { return "token:" + s.token }

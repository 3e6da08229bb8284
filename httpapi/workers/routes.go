package workers

import (
	"net/http"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
)

// Limits bound the protocol on one server; zero values take the defaults.
type Limits struct {
	// MaxResultBytes bounds one result's JSON text (default
	// apiv1.DefaultMaxResultBytes).
	MaxResultBytes int
	// MaxWait bounds a claim's wait (default 30s).
	MaxWait time.Duration
	// LongPolls caps the claims waiting at once on this server (default
	// 1024), LongPollsPerToken those of one token (default 256).
	LongPolls, LongPollsPerToken int
}

// Config is what the protocol is served from.
type Config struct {
	Limits Limits
}

// Handlers serves the worker protocol.
type Handlers struct{ cfg Config }

// New builds the worker protocol's endpoints.
func New(cfg Config) *Handlers { return &Handlers{cfg: cfg} }

// Routes are the worker protocol's endpoints.
func (h *Handlers) Routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "POST /v1/workers", Role: endpoint.RoleWorker, Handle: h.unserved},
		{Pattern: "POST /v1/workers/{worker_id}/claim", Role: endpoint.RoleWorker, Handle: h.unserved},
		{Pattern: "POST /v1/workers/{worker_id}/report", Role: endpoint.RoleWorker, Handle: h.unserved},
		{Pattern: "DELETE /v1/workers/{worker_id}", Role: endpoint.RoleWorker, Handle: h.unserved},
	}
}

func (h *Handlers) unserved(http.ResponseWriter, *http.Request, endpoint.Principal) error {
	return &endpoint.Error{Code: apiv1.CodeUnavailable, Msg: "this server does not serve the worker protocol yet", RetryAfter: 5 * time.Second}
}

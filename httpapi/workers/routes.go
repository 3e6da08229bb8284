package workers

import (
	"net/http"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
)

// Handlers serves the worker protocol.
type Handlers struct{}

// New builds the worker protocol's endpoints.
func New() *Handlers { return &Handlers{} }

// Routes are the worker protocol's endpoints.
func (h *Handlers) Routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "POST /v1/workers", Role: endpoint.RoleSubmitter, Handle: h.unserved},
		{Pattern: "POST /v1/workers/{worker_id}/claim", Role: endpoint.RoleSubmitter, Handle: h.unserved},
		{Pattern: "POST /v1/workers/{worker_id}/report", Role: endpoint.RoleSubmitter, Handle: h.unserved},
		{Pattern: "DELETE /v1/workers/{worker_id}", Role: endpoint.RoleSubmitter, Handle: h.unserved},
	}
}

func (h *Handlers) unserved(http.ResponseWriter, *http.Request, endpoint.Principal) error {
	return &endpoint.Error{Code: apiv1.CodeUnavailable, Msg: "this server does not serve the worker protocol yet", RetryAfter: 5 * time.Second}
}

package endpoint

import "github.com/ax-sched/ax/apiv1"

// Role orders what a token may do.
type Role int

const (
	RoleSubmitter Role = iota + 1 // submit; read its own tenant's tasks
	RoleOperator                  // + cancel, replay, priority, drain, bulk actions
	RoleAdmin                     // everything
)

// RoleWorker is a remote worker's token: below every other role, it may
// call only the worker protocol (routes of that role), within its
// Principal.Worker scope.
const RoleWorker Role = -1

// Principal is who made a request.
type Principal struct {
	Name    string
	Role    Role
	Tenant  string // "" = every tenant
	Cluster bool   // another ax server (hand-off, forwarding)
	// Worker is a worker token's scope (set exactly for RoleWorker).
	Worker *WorkerScope
}

// WorkerScope is what a worker token may serve: tasks of Tenants only, in
// Pools only, of Types only (empty: every type).
type WorkerScope struct {
	Tenants, Pools, Types []string
}

// ErrExpired: a known token past its expires_at. Both 401s name the
// header the token goes in.
var ErrExpired = &Error{Code: apiv1.CodeTokenExpired, Msg: "the bearer token has expired", Field: "Authorization"}

// ErrUnknown: no token, or none of ours.
var ErrUnknown = &Error{Code: apiv1.CodeUnauthorized, Msg: "missing or unknown bearer token", Field: "Authorization"}

// Sees reports whether p may see a task of tenant.
func (p Principal) Sees(tenant string) bool { return p.Tenant == "" || p.Tenant == tenant }

// Scope is the tenant a request of p addresses when it names asked ("":
// none): a token of every tenant what it asks; a token of one tenant its
// own, and naming another is 403 field tenant (as a submit for another
// tenant is), never a quiet answer about its own. what completes "this
// token may only …".
func (p Principal) Scope(asked, what string) (string, error) {
	if p.Tenant == "" {
		return asked, nil
	}
	if asked != "" && asked != p.Tenant {
		return "", &Error{Code: apiv1.CodeForbidden, Field: "tenant",
			Msg: "this token may only " + what + " tenant " + p.Tenant}
	}
	return p.Tenant, nil
}

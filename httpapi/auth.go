package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/httpapi/dags"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/httpapi/schedules"
	"github.com/ax-sched/ax/httpapi/stream"
)

// Role orders what a token may do.
type Role = endpoint.Role

// The roles, each allowed what the one before it is, and more.
const (
	RoleSubmitter = endpoint.RoleSubmitter // submit; read its own tenant's tasks
	RoleOperator  = endpoint.RoleOperator  // + cancel, replay, priority, drain, bulk actions
	RoleAdmin     = endpoint.RoleAdmin     // everything
	RoleWorker    = endpoint.RoleWorker    // the worker protocol only
)

// Principal is who made a request.
type Principal = endpoint.Principal

// Schedules is what the schedule endpoints need (schedules.Scheduler).
type Schedules = schedules.Scheduler

// DAGs is what the DAG endpoints need (dags.Runs).
type DAGs = dags.Runs

// ParseRole reads submitter|operator|admin|worker.
func ParseRole(s string) (Role, bool) {
	switch s {
	case "submitter":
		return RoleSubmitter, true
	case "operator":
		return RoleOperator, true
	case "admin":
		return RoleAdmin, true
	case "worker":
		return RoleWorker, true
	}
	return 0, false
}

// Token is one configured API token, stored hashed.
type Token struct {
	Name   string
	SHA256 string // hex of sha256(token)
	Role   Role
	Tenant string // "" = every tenant
	// Expires, when not zero, is when the token stops working (401
	// token_expired from then on).
	Expires time.Time
	// Tenants, Pools and Types scope a worker token (RoleWorker).
	Tenants, Pools, Types []string
}

// Auth checks bearer tokens. With Enabled false every request is an admin
// of every tenant (ax dev says so loudly).
type Auth struct {
	Enabled      bool
	Tokens       []Token
	ClusterToken string
	// Now is the clock tokens expire by (nil: time.Now).
	Now func() time.Time
	// Failures (nil: none) throttles the clients whose tokens fail.
	Failures *FailureLimiter

	mu sync.RWMutex // guards Tokens once serving (SetTokens)
}

// SetTokens replaces the API tokens of a running server (SIGHUP reload).
func (a *Auth) SetTokens(ts []Token) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Tokens = ts
}

// HashToken is the stored form of a token.
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// Authenticate returns the principal of r, or false.
func (a *Auth) Authenticate(r *http.Request) (Principal, bool) {
	p, err := a.authenticate(r)
	return p, err == nil
}

// authenticate returns the principal of r, or errUnknown or errExpired,
// or, for a client over its failures, a 429 (its token not looked at).
func (a *Auth) authenticate(r *http.Request) (Principal, *endpoint.Error) {
	if a == nil || !a.Enabled {
		return Principal{Name: "anonymous", Role: RoleAdmin}, nil
	}
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	if wait := a.Failures.Wait(client); wait > 0 {
		return Principal{}, throttled(wait)
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return Principal{}, endpoint.ErrUnknown
	}
	p, e := a.check(tok)
	if e != nil {
		a.Failures.Fail(client)
	}
	return p, e
}

// check returns the principal of a bearer token.
func (a *Auth) check(tok string) (Principal, *endpoint.Error) {
	if a.ClusterToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.ClusterToken)) == 1 {
		return Principal{Name: "cluster", Role: RoleAdmin, Cluster: true}, nil
	}
	sum := HashToken(tok)
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, t := range a.Tokens {
		if subtle.ConstantTimeCompare([]byte(sum), []byte(strings.ToLower(t.SHA256))) == 1 {
			now := time.Now
			if a.Now != nil {
				now = a.Now
			}
			if !t.Expires.IsZero() && !now().Before(t.Expires) {
				return Principal{}, endpoint.ErrExpired
			}
			p := Principal{Name: t.Name, Role: t.Role, Tenant: t.Tenant}
			if t.Role == RoleWorker {
				p.Worker = &endpoint.WorkerScope{Tenants: t.Tenants, Pools: t.Pools, Types: t.Types}
			}
			return p, nil
		}
	}
	return Principal{}, endpoint.ErrUnknown
}

var _ stream.Tokens = (*Auth)(nil)

// Still reports whether p's token is still configured, with the same role
// and tenant, and not expired: a ticket or a stream outlives no token.
func (a *Auth) Still(p Principal) bool {
	if a == nil || !a.Enabled {
		return true
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, t := range a.Tokens {
		if t.Name == p.Name && t.Role == p.Role && t.Tenant == p.Tenant && (t.Expires.IsZero() || now().Before(t.Expires)) {
			return true
		}
	}
	return false
}

package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// Role orders what a token may do.
type Role int

const (
	RoleSubmitter Role = iota + 1 // submit; read its own tenant's tasks
	RoleOperator                  // + cancel, replay, priority, drain, bulk actions
	RoleAdmin                     // everything
)

// ParseRole reads submitter|operator|admin.
func ParseRole(s string) (Role, bool) {
	switch s {
	case "submitter":
		return RoleSubmitter, true
	case "operator":
		return RoleOperator, true
	case "admin":
		return RoleAdmin, true
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
}

// Principal is who made a request.
type Principal struct {
	Name    string
	Role    Role
	Tenant  string // "" = every tenant
	Cluster bool   // another ax server (hand-off, forwarding)
}

// Auth checks bearer tokens. With Enabled false every request is an admin
// of every tenant (ax dev says so loudly).
type Auth struct {
	Enabled      bool
	Tokens       []Token
	ClusterToken string
	// Now is the clock tokens expire by (nil: time.Now).
	Now func() time.Time

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

// errExpired: a known token past its expires_at. Both 401s name the
// header the token goes in.
var errExpired = &apiError{code: apiv1.CodeTokenExpired, msg: "the bearer token has expired", field: "Authorization"}

// errUnknown: no token, or none of ours.
var errUnknown = &apiError{code: apiv1.CodeUnauthorized, msg: "missing or unknown bearer token", field: "Authorization"}

// authenticate returns the principal of r, or errUnknown or errExpired.
func (a *Auth) authenticate(r *http.Request) (Principal, *apiError) {
	if a == nil || !a.Enabled {
		return Principal{Name: "anonymous", Role: RoleAdmin}, nil
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return Principal{}, errUnknown
	}
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
				return Principal{}, errExpired
			}
			return Principal{Name: t.Name, Role: t.Role, Tenant: t.Tenant}, nil
		}
	}
	return Principal{}, errUnknown
}

// sees reports whether p may see a task of tenant.
func (p Principal) sees(tenant string) bool { return p.Tenant == "" || p.Tenant == tenant }

// scope is the tenant a request of p addresses when it names asked ("":
// none): a token of every tenant what it asks; a token of one tenant its
// own, and naming another is 403 field tenant (as a submit for another
// tenant is), never a quiet answer about its own. what completes "this
// token may only …".
func (p Principal) scope(asked, what string) (string, error) {
	if p.Tenant == "" {
		return asked, nil
	}
	if asked != "" && asked != p.Tenant {
		return "", &apiError{code: apiv1.CodeForbidden, field: "tenant",
			msg: "this token may only " + what + " tenant " + p.Tenant}
	}
	return p.Tenant, nil
}

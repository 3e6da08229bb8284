package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
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
	if a == nil || !a.Enabled {
		return Principal{Name: "anonymous", Role: RoleAdmin}, true
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return Principal{}, false
	}
	if a.ClusterToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.ClusterToken)) == 1 {
		return Principal{Name: "cluster", Role: RoleAdmin, Cluster: true}, true
	}
	sum := HashToken(tok)
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, t := range a.Tokens {
		if subtle.ConstantTimeCompare([]byte(sum), []byte(strings.ToLower(t.SHA256))) == 1 {
			return Principal{Name: t.Name, Role: t.Role, Tenant: t.Tenant}, true
		}
	}
	return Principal{}, false
}

// sees reports whether p may see a task of tenant.
func (p Principal) sees(tenant string) bool { return p.Tenant == "" || p.Tenant == tenant }

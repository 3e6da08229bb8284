package endpoint

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// LongPolls bounds the long-polls a server holds (/v1/events, a remote
// worker's claim): each holds a Redis connection or a goroutine for its
// whole wait, so without a bound one tenant's long-polls take the pool
// every submit, claim and leader loop needs. Beyond the per-caller cap (a
// tenant's, or a token's: see Poller; a remote worker's claims count per
// token) or the server-wide cap a long-poll gets 429, whose message names
// the cap it met.
type LongPolls struct {
	mu        sync.Mutex
	max       int
	perTenant int
	total     int
	by        map[string]int
}

// NewLongPolls caps long-polls at max on the server (default 8) and
// perTenant for one caller, a tenant or a token (default 2).
func NewLongPolls(max, perTenant int) *LongPolls {
	if max <= 0 {
		max = 8
	}
	if perTenant <= 0 {
		perTenant = 2
	}
	return &LongPolls{max: max, perTenant: perTenant, by: map[string]int{}}
}

// Acquire takes a place for who ("tenant:<name>", or "token:<name>" for an
// every-tenant token and for a worker token; "" for another server's
// proxied long-poll, whose caller its own server counted); release gives
// it back.
func (l *LongPolls) Acquire(who string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if who != "" && l.by[who] >= l.perTenant {
		kind, _, _ := strings.Cut(who, ":") // "tenant" or "token"
		return nil, &Error{Code: apiv1.CodeSaturated, RetryAfter: time.Second,
			Msg: "too many concurrent long-polls for this " + kind + " on this server: at most " + strconv.Itoa(l.perTenant) + " per " + kind}
	}
	if l.total >= l.max {
		return nil, &Error{Code: apiv1.CodeSaturated, RetryAfter: time.Second,
			Msg: "too many concurrent long-polls on this server: at most " + strconv.Itoa(l.max)}
	}
	l.by[who]++
	l.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.by[who]--; l.by[who] == 0 {
				delete(l.by, who)
			}
		})
	}, nil
}

// Poller is who a long-poll or stream counts against: the tenant, or an
// every-tenant token by name; "" for another server's proxied call.
func Poller(p Principal) string {
	switch {
	case p.Cluster:
		return ""
	case p.Tenant == "":
		return "token:" + p.Name
	}
	return "tenant:" + p.Tenant
}

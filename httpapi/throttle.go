package httpapi

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
)

// maxThrottled bounds the clients a FailureLimiter remembers; past it the
// ones whose allowance is back to full are forgotten first.
const maxThrottled = 1 << 16

// failureLogEvery is the most often a FailureLimiter logs.
const failureLogEvery = 10 * time.Second

// FailureLimiter throttles failed authentications per client: each client
// IP (an IPv6 client by its /64) may fail PerMinute times in a burst, then
// once every 60s/PerMinute; beyond that its requests are answered 429 with
// Retry-After before their token is looked at, whatever the token. It logs
// the failures at most once every 10 s.
type FailureLimiter struct {
	perMinute int
	log       *slog.Logger
	now       func() time.Time

	mu        sync.Mutex
	clients   map[string]*allowance
	failed    int // since the last log line
	refused   int // since the last log line
	lastLog   time.Time
	lastGuilt string
}

type allowance struct {
	left float64 // failures still allowed
	at   time.Time
}

// NewFailureLimiter allows perMinute failures per client and minute; log
// (nil: discarded) gets the bounded-rate log lines.
func NewFailureLimiter(perMinute int, log *slog.Logger) *FailureLimiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FailureLimiter{perMinute: perMinute, log: log, now: time.Now, clients: map[string]*allowance{}}
}

// refill brings a's allowance to now; mu held.
func (f *FailureLimiter) refill(a *allowance, now time.Time) {
	a.left = min(float64(f.perMinute), a.left+now.Sub(a.at).Minutes()*float64(f.perMinute))
	a.at = now
}

// Wait is how long client must wait before its next authentication is
// looked at; 0: now.
func (f *FailureLimiter) Wait(client string) time.Duration {
	if f == nil || f.perMinute <= 0 {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.clients[clientKey(client)]
	if a == nil {
		return 0
	}
	now := f.now()
	f.refill(a, now)
	if a.left >= 1 {
		return 0
	}
	f.refused++
	f.logLocked(now)
	return time.Duration((1 - a.left) / float64(f.perMinute) * float64(time.Minute))
}

// Fail counts a failed authentication of client.
func (f *FailureLimiter) Fail(client string) {
	if f == nil || f.perMinute <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	k := clientKey(client)
	a := f.clients[k]
	if a == nil {
		if len(f.clients) >= maxThrottled {
			f.forget(now)
		}
		a = &allowance{left: float64(f.perMinute), at: now}
		f.clients[k] = a
	}
	f.refill(a, now)
	a.left = max(0, a.left-1)
	f.failed++
	f.lastGuilt = k
	f.logLocked(now)
}

// forget drops the clients back to a full allowance, or, if none is, one
// at random; mu held.
func (f *FailureLimiter) forget(now time.Time) {
	for k, a := range f.clients {
		if f.refill(a, now); a.left >= float64(f.perMinute) {
			delete(f.clients, k)
		}
	}
	for k := range f.clients {
		if len(f.clients) < maxThrottled {
			break
		}
		delete(f.clients, k)
	}
}

// logLocked writes one line for the failures and refusals since the last
// one, unless one was written less than failureLogEvery ago; mu held.
func (f *FailureLimiter) logLocked(now time.Time) {
	if now.Sub(f.lastLog) < failureLogEvery {
		return
	}
	f.log.Warn("failed authentications", "failed", f.failed, "throttled", f.refused, "last_client", f.lastGuilt,
		"since", f.lastLog.Format(time.RFC3339))
	f.failed, f.refused, f.lastLog = 0, 0, now
}

// clientKey is the throttled unit of an IP: itself, or its /64 for IPv6
// (one host holds a whole /64).
func clientKey(ip string) string {
	p := net.ParseIP(ip)
	if p == nil || p.To4() != nil {
		return ip
	}
	return p.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// throttled is the 429 of a client over its failures.
func throttled(wait time.Duration) *endpoint.Error {
	return &endpoint.Error{Code: apiv1.CodeQuotaExceeded, Field: "Authorization", RetryAfter: max(wait, time.Second),
		Msg: "too many failed authentications from this address: retry later"}
}

package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// GET /v1/stream: live updates as server-sent events, for the dashboard.
//
// A browser's EventSource cannot send an Authorization header, and a token
// in a URL ends up in histories and proxy logs. So the page first POSTs
// /v1/stream/tickets with its token and opens the stream with the answer: a
// ticket signed by the server (HMAC; with a cluster token, a key derived
// from it, so any server of the federation accepts it), naming the token's
// principal, valid for ticketTTL and only once on a server. Callers that can
// set headers (curl) use the bearer token instead. A stream whose token is
// removed (SIGHUP reload) or expires ends at the next heartbeat.
//
// Streams count against the long-poll caps (per tenant and per server), but
// hold no Redis connection each: one reader per server (hub) blocks on the
// region's event stream, on the long-polls' Redis client, while anyone
// listens, and hands each batch to every stream. A hang-up unsubscribes and
// gives the place back at once.
const (
	ticketTTL       = 30 * time.Second
	streamHeartbeat = 15 * time.Second
	hubWait         = 2 * time.Second // the reader's XREAD block: how long it outlives its last listener
)

// tickets issues and redeems stream tickets.
type tickets struct {
	key  []byte
	now  func() time.Time
	mu   sync.Mutex
	used map[string]time.Time // nonce → expiry, of tickets redeemed here
}

func newTickets(clusterToken string) *tickets {
	key := make([]byte, 32)
	if clusterToken != "" {
		m := hmac.New(sha256.New, []byte(clusterToken))
		m.Write([]byte("ax stream ticket v1"))
		key = m.Sum(nil)
	} else {
		_, _ = rand.Read(key)
	}
	return &tickets{key: key, now: time.Now, used: map[string]time.Time{}}
}

type ticketClaims struct {
	Name    string `json:"n"`
	Role    Role   `json:"r"`
	Tenant  string `json:"t,omitempty"`
	Expires int64  `json:"e"` // unix ms
	Nonce   string `json:"x"`
}

var errBadTicket = &apiError{code: apiv1.CodeUnauthorized, field: "ticket",
	msg: "missing, forged, expired or used stream ticket (POST /v1/stream/tickets for a new one)"}

func (k *tickets) sign(b []byte) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write(b)
	return m.Sum(nil)
}

func (k *tickets) issue(p Principal) (string, time.Time) {
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	exp := k.now().Add(ticketTTL)
	b, _ := json.Marshal(ticketClaims{Name: p.Name, Role: p.Role, Tenant: p.Tenant, Expires: exp.UnixMilli(),
		Nonce: base64.RawURLEncoding.EncodeToString(nonce)})
	enc := base64.RawURLEncoding
	return enc.EncodeToString(b) + "." + enc.EncodeToString(k.sign(b)), exp
}

func (k *tickets) redeem(s string) (Principal, *apiError) {
	body, sig, ok := strings.Cut(s, ".")
	enc := base64.RawURLEncoding
	b, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil || subtle.ConstantTimeCompare(mac, k.sign(b)) != 1 {
		return Principal{}, errBadTicket
	}
	var c ticketClaims
	if err := json.Unmarshal(b, &c); err != nil {
		return Principal{}, errBadTicket
	}
	now := k.now()
	exp := time.UnixMilli(c.Expires)
	k.mu.Lock()
	defer k.mu.Unlock()
	for n, e := range k.used {
		if now.After(e) {
			delete(k.used, n)
		}
	}
	if !now.Before(exp) || exp.Sub(now) > ticketTTL {
		return Principal{}, errBadTicket
	}
	if _, seen := k.used[c.Nonce]; seen {
		return Principal{}, errBadTicket
	}
	k.used[c.Nonce] = exp
	return Principal{Name: c.Name, Role: c.Role, Tenant: c.Tenant}, nil
}

// still reports whether p's token is still configured, with the same role
// and tenant, and not expired: a ticket or a stream outlives no token.
func (a *Auth) still(p Principal) bool {
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

// principal authenticates r for pattern: the bearer token, or on GET
// /v1/stream without one, a stream ticket.
func (a *API) principal(pattern string, r *http.Request) (Principal, *apiError) {
	if pattern == streamRoute && a.cfg.Auth != nil && a.cfg.Auth.Enabled && r.Header.Get("Authorization") == "" {
		p, err := a.tickets.redeem(r.URL.Query().Get("ticket"))
		if err == nil && !a.cfg.Auth.still(p) {
			err = errBadTicket
		}
		return p, err
	}
	return a.cfg.Auth.authenticate(r)
}

const streamRoute = "GET /v1/stream"

func (a *API) streamTicket(w http.ResponseWriter, _ *http.Request, p Principal) error {
	if p.Cluster {
		return &apiError{code: apiv1.CodeForbidden, field: "Authorization", msg: "stream tickets are for API tokens"}
	}
	t, exp := a.tickets.issue(p)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, apiv1.StreamTicket{Ticket: t, ExpiresAt: exp.UTC()})
	return nil
}

// hub is the one reader of the region's event stream for every open
// stream of this server. It owns its goroutine: started by the first
// subscriber, it ends after the read that finds none left.
type hub struct {
	read    func(ctx context.Context, after []string, count int, block time.Duration) ([]task.Event, []string, error)
	mu      sync.Mutex
	subs    map[chan []task.Event]struct{}
	running bool
}

func (h *hub) subscribe() chan []task.Event {
	c := make(chan []task.Event, 16)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[c] = struct{}{}
	if !h.running {
		h.running = true
		go h.run()
	}
	return c
}

func (h *hub) unsubscribe(c chan []task.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, c)
}

func (h *hub) run() {
	var after []string
	for {
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), hubWait+5*time.Second)
		evs, next, err := h.read(ctx, after, 200, hubWait)
		cancel()
		if err != nil {
			h.pause() // Redis away: the streams' periodic refreshes go on
			continue
		}
		after = next
		if len(evs) == 0 {
			continue
		}
		h.mu.Lock()
		for c := range h.subs {
			select {
			case c <- evs:
			default: // a slow stream misses a batch; its next refresh catches up
			}
		}
		h.mu.Unlock()
	}
}

// pause waits a second before the next read, less once nobody listens.
func (h *hub) pause() {
	for range 10 {
		h.mu.Lock()
		n := len(h.subs)
		h.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// poller is who a long-poll or stream counts against: the tenant, or an
// every-tenant token by name; "" for another server's proxied call.
func poller(p Principal) string {
	switch {
	case p.Cluster:
		return ""
	case p.Tenant == "":
		return "token:" + p.Name
	}
	return "tenant:" + p.Tenant
}

// stream is GET /v1/stream: without task=, `regions` events (the
// /v1/regions answer, whenever it changes) and `events` (this region's
// events, task ids hidden from a tenant's token as on /v1/events); with
// task=ID, `task` events (the task as GET /v1/tasks/{id} answers it,
// whenever it changes, wherever it is held). `: ping` comments every
// streamHeartbeat of silence; an `error` event before the server ends it.
func (a *API) stream(w http.ResponseWriter, r *http.Request, p Principal) error {
	v, err := parseQuery(r.URL.RawQuery, "ticket", "task")
	if err != nil {
		return err
	}
	id := v.Get("task")
	if id != "" {
		if _, err := a.getFor(r.Context(), p, id, hops(r)); err != nil {
			return err
		}
	}
	release, err := a.polls.acquire(poller(p))
	if err != nil {
		return err
	}
	defer release()
	sub := a.hub.subscribe()
	defer a.hub.unsubscribe(sub)

	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy must not hold the events back
	w.WriteHeader(http.StatusOK)
	lastWrite := time.Now()
	write := func(s string) error {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprint(w, s); err != nil {
			return err
		}
		lastWrite = time.Now()
		return rc.Flush()
	}
	send := func(event string, v any) error {
		b, _ := json.Marshal(v)
		return write("event: " + event + "\ndata: " + string(b) + "\n\n")
	}
	if err := write("retry: 2000\n: ax stream\n\n"); err != nil {
		return nil
	}

	// A refresh reads the task (or the regions) and sends it when it
	// changed: at most every period, or after the region's events say
	// something happened (a task held elsewhere changes without them).
	period := time.Second
	if id != "" {
		period = 2 * time.Second
	}
	var last []byte
	refresh := func() error {
		var cur any
		event := "regions"
		if id == "" {
			cur = a.regionsResponse()
		} else {
			event = "task"
			t, err := a.getFor(r.Context(), p, id, hops(r))
			if err != nil {
				return send("error", apiv1.ErrorBody{Error: toAPIError(err).body()})
			}
			cur = t
		}
		b, _ := json.Marshal(cur)
		if bytes.Equal(b, last) {
			return nil
		}
		last = b
		return write("event: " + event + "\ndata: " + string(b) + "\n\n")
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastRefresh, pending, checked := time.Time{}, true, time.Now()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case evs := <-sub:
			pending = true
			if id == "" {
				if err := send("events", apiv1.EventsResponse{Region: a.n.Region(), Events: scopeEvents(slices.Clone(evs), p)}); err != nil {
					return nil
				}
			}
		case <-tick.C:
		}
		if now := time.Now(); now.Sub(lastRefresh) >= period || (pending && now.Sub(lastRefresh) >= 250*time.Millisecond) {
			lastRefresh, pending = now, false
			if err := refresh(); err != nil {
				return nil
			}
		}
		if time.Since(checked) >= streamHeartbeat {
			checked = time.Now()
			if !p.Cluster && !a.cfg.Auth.still(p) {
				_ = send("error", apiv1.ErrorBody{Error: errUnknown.body()})
				return nil
			}
		}
		if time.Since(lastWrite) >= streamHeartbeat {
			if err := write(": ping\n\n"); err != nil {
				return nil
			}
		}
	}
}

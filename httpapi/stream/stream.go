package stream

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
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/httpapi/endpoint"
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

// Route is the pattern of GET /v1/stream, which also takes a ticket
// instead of a bearer token (Redeem).
const Route = "GET /v1/stream"

// Federation is what the live updates need of the federation;
// *federation.Node implements it.
type Federation interface {
	// Region is this server's region.
	Region() string
	// Events reads up to count of the region's events after the stream
	// ids in after, blocking up to block for the first.
	Events(ctx context.Context, after []string, count int, block time.Duration) ([]task.Event, []string, error)
	// Proxy asks a server of regionName the same question (path) and
	// decodes its answer into out.
	Proxy(ctx context.Context, regionName, method, path string, in, out any) error
}

// Tokens says whether a principal's token is still valid: a stream, or a
// ticket, outlives no token. *httpapi.Auth implements it.
type Tokens interface {
	Still(p endpoint.Principal) bool
}

// Config is what the live updates are served from.
type Config struct {
	Fed    Federation
	Tokens Tokens
	// Regions is the GET /v1/regions answer.
	Regions func() apiv1.RegionsResponse
	// Task reads a task as GET /v1/tasks/{id} answers p (another tenant's
	// is not found).
	Task func(ctx context.Context, p endpoint.Principal, id string, hops int) (*task.Task, error)
	// LongPolls caps concurrent long-polls and streams on this server
	// (default 8), LongPollsPerTenant those of one tenant (default 2).
	LongPolls, LongPollsPerTenant int
	// ClusterToken, when set, keys the tickets, so that every server of
	// the federation accepts them.
	ClusterToken string
}

// Streams serves GET /v1/events, POST /v1/stream/tickets and GET
// /v1/stream.
type Streams struct {
	cfg     Config
	polls   *endpoint.LongPolls
	tickets *tickets
	hub     *hub
}

// New builds the live updates of cfg.
func New(cfg Config) *Streams {
	s := &Streams{cfg: cfg, polls: endpoint.NewLongPolls(cfg.LongPolls, cfg.LongPollsPerTenant), tickets: newTickets(cfg.ClusterToken)}
	s.hub = &hub{subs: map[chan []task.Event]struct{}{}, read: func(ctx context.Context, after []string, count int, block time.Duration) ([]task.Event, []string, error) {
		return s.cfg.Fed.Events(ctx, after, count, block)
	}}
	return s
}

// Routes are the endpoints Streams serves.
func (s *Streams) Routes() []endpoint.Route {
	return []endpoint.Route{
		{Pattern: "GET /v1/events", Role: endpoint.RoleSubmitter, Handle: s.events},
		{Pattern: "POST /v1/stream/tickets", Role: endpoint.RoleSubmitter, Handle: s.streamTicket},
		{Pattern: Route, Role: endpoint.RoleSubmitter, Handle: s.stream},
	}
}

// Redeem is the principal a stream ticket names, once, while its token is
// still valid (Tokens).
func (s *Streams) Redeem(ticket string) (endpoint.Principal, *endpoint.Error) {
	p, err := s.tickets.redeem(ticket)
	if err == nil && !s.cfg.Tokens.Still(p) {
		err = errBadTicket
	}
	return p, err
}

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
	Name    string        `json:"n"`
	Role    endpoint.Role `json:"r"`
	Tenant  string        `json:"t,omitempty"`
	Expires int64         `json:"e"` // unix ms
	Nonce   string        `json:"x"`
}

var errBadTicket = &endpoint.Error{Code: apiv1.CodeUnauthorized, Field: "ticket",
	Msg: "missing, forged, expired or used stream ticket (POST /v1/stream/tickets for a new one)"}

func (k *tickets) sign(b []byte) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write(b)
	return m.Sum(nil)
}

func (k *tickets) issue(p endpoint.Principal) (string, time.Time) {
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	exp := k.now().Add(ticketTTL)
	b, _ := json.Marshal(ticketClaims{Name: p.Name, Role: p.Role, Tenant: p.Tenant, Expires: exp.UnixMilli(),
		Nonce: base64.RawURLEncoding.EncodeToString(nonce)})
	enc := base64.RawURLEncoding
	return enc.EncodeToString(b) + "." + enc.EncodeToString(k.sign(b)), exp
}

func (k *tickets) redeem(s string) (endpoint.Principal, *endpoint.Error) {
	body, sig, ok := strings.Cut(s, ".")
	enc := base64.RawURLEncoding
	b, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil || subtle.ConstantTimeCompare(mac, k.sign(b)) != 1 {
		return endpoint.Principal{}, errBadTicket
	}
	var c ticketClaims
	if err := json.Unmarshal(b, &c); err != nil {
		return endpoint.Principal{}, errBadTicket
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
		return endpoint.Principal{}, errBadTicket
	}
	if _, seen := k.used[c.Nonce]; seen {
		return endpoint.Principal{}, errBadTicket
	}
	k.used[c.Nonce] = exp
	return endpoint.Principal{Name: c.Name, Role: c.Role, Tenant: c.Tenant}, nil
}

func (s *Streams) streamTicket(w http.ResponseWriter, _ *http.Request, p endpoint.Principal) error {
	if p.Cluster {
		return &endpoint.Error{Code: apiv1.CodeForbidden, Field: "Authorization", Msg: "stream tickets are for API tokens"}
	}
	t, exp := s.tickets.issue(p)
	w.Header().Set("Cache-Control", "no-store")
	endpoint.WriteJSON(w, http.StatusCreated, apiv1.StreamTicket{Ticket: t, ExpiresAt: exp.UTC()})
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

// stream is GET /v1/stream: without task=, `regions` events (the
// /v1/regions answer, whenever it changes) and `events` (this region's
// events, task ids hidden from a tenant's token as on /v1/events); with
// task=ID, `task` events (the task as GET /v1/tasks/{id} answers it,
// whenever it changes, wherever it is held). `: ping` comments every
// streamHeartbeat of silence; an `error` event before the server ends it.
func (s *Streams) stream(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	v, err := endpoint.ParseQuery(r.URL.RawQuery, "ticket", "task")
	if err != nil {
		return err
	}
	id := v.Get("task")
	if id != "" {
		if _, err := s.cfg.Task(r.Context(), p, id, endpoint.Hops(r)); err != nil {
			return err
		}
	}
	release, err := s.polls.Acquire(endpoint.Poller(p))
	if err != nil {
		return err
	}
	defer release()
	sub := s.hub.subscribe()
	defer s.hub.unsubscribe(sub)

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
			cur = s.cfg.Regions()
		} else {
			event = "task"
			t, err := s.cfg.Task(r.Context(), p, id, endpoint.Hops(r))
			if err != nil {
				return send("error", apiv1.ErrorBody{Error: endpoint.ErrorOf(err).Body()})
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
				if err := send("events", apiv1.EventsResponse{Region: s.cfg.Fed.Region(), Events: scopeEvents(slices.Clone(evs), p)}); err != nil {
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
			if !p.Cluster && !s.cfg.Tokens.Still(p) {
				_ = send("error", apiv1.ErrorBody{Error: endpoint.ErrUnknown.Body()})
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

func (s *Streams) events(w http.ResponseWriter, r *http.Request, p endpoint.Principal) error {
	q := r.URL.Query()
	release, err := s.polls.Acquire(endpoint.Poller(p))
	if err != nil {
		return err
	}
	defer release()
	if reg := q.Get("region"); reg != "" && reg != s.cfg.Fed.Region() {
		if endpoint.Hops(r) > 0 {
			return &fanout.NotServedError{Region: reg}
		}
		wait, _, err := parseEventsQuery(q)
		if err != nil {
			return err
		}
		// Calls to peers time out (federation's peer client, 10 s): a
		// longer wait would end every quiet poll of another region in a
		// 503. Its answer comes within maxProxiedWait, empty if need be,
		// and the caller polls again.
		if wait > maxProxiedWait {
			q.Set("wait", maxProxiedWait.String())
		}
		var resp apiv1.EventsResponse
		path := "/v1/events?" + q.Encode()
		if err := s.cfg.Fed.Proxy(r.Context(), reg, http.MethodGet, path, nil, &resp); err != nil {
			return err
		}
		resp.Events = scopeEvents(resp.Events, p)
		endpoint.WriteJSON(w, http.StatusOK, resp)
		return nil
	}
	wait, after, err := parseEventsQuery(q)
	if err != nil {
		return err
	}
	// The server's read and write timeouts would end a long-poll early:
	// this request gets its wait on top of them.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	evs, next, err := s.cfg.Fed.Events(r.Context(), after, 200, max(wait, time.Millisecond))
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []task.Event{}
	}
	endpoint.WriteJSON(w, http.StatusOK, apiv1.EventsResponse{Region: s.cfg.Fed.Region(), Events: scopeEvents(evs, p), Next: strings.Join(next, ",")})
	return nil
}

// maxProxiedWait bounds the wait of a long-poll of another region's events
// (its server is asked through the peer client, whose calls time out).
const maxProxiedWait = 5 * time.Second

// parseEventsQuery reads GET /v1/events's wait= (default 10s, at most 1m)
// and after= (the previous answer's next: one stream id per shard, each
// "<ms>-<seq>", "<ms>", "$" or empty). No after starts at the newest entry:
// a first call returns only new events. A malformed id would reach Redis
// and come back as its error, a 503, instead of the caller's 400.
func parseEventsQuery(q url.Values) (time.Duration, []string, error) {
	wait := 10 * time.Second
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Minute {
			return 0, nil, &task.FieldError{Field: "wait", Msg: "a duration up to 1m"}
		}
		wait = d
	}
	var after []string
	if v := q.Get("after"); v != "" {
		after = strings.Split(v, ",")
		for _, id := range after {
			if !streamID(id) {
				return 0, nil, &task.FieldError{Field: "after", Msg: "stream ids \"<ms>-<seq>\", comma-separated, as the last answer's next"}
			}
		}
	}
	return wait, after, nil
}

// streamID reports whether s is an id XREAD takes: "", "$", "<ms>" or
// "<ms>-<seq>", each part a 64-bit unsigned number.
func streamID(s string) bool {
	if s == "" || s == "$" {
		return true
	}
	ms, seq, two := strings.Cut(s, "-")
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil {
		return false
	}
	if two {
		_, err := strconv.ParseUint(seq, 10, 64)
		return err == nil
	}
	return true
}

// scopeEvents hides task ids from a token of one tenant: the stream is the
// region's, every tenant's tasks in it. What happened and how many tasks
// stay; which tasks is for tokens of every tenant.
func scopeEvents(evs []task.Event, p endpoint.Principal) []task.Event {
	if p.Tenant == "" {
		return evs
	}
	for i := range evs {
		evs[i].Tasks = nil
	}
	return evs
}

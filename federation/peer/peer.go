package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/task"
)

// Config of a server's peer client.
type Config struct {
	Region  string   // this server's region
	Regions []string // every region of the federation (config regions:)
	// Token authenticates server-to-server calls; "" sends none.
	Token string
	// TLS is the client side TLS of calls to https peers; nil: the system roots.
	TLS *tls.Config
	// AllowInsecure lets the token go to a plain-http peer off the loopback
	// interface; without it such a call is refused unsent.
	AllowInsecure bool
	View          *view.View
	Metrics       *metrics.Metrics // counts forwarded requests; nil: none
	Logger        *slog.Logger
}

// Client calls other regions' servers with the cluster token and a hop
// count: forwarded reads and actions, hand-offs, fan-outs.
type Client struct {
	cfg     Config
	members []string // cfg.Regions and cfg.Region
	http    *http.Client
}

// New is the peer client of cfg.
func New(cfg Config) *Client {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	members := slices.Clone(cfg.Regions)
	if !slices.Contains(members, cfg.Region) {
		members = append(members, cfg.Region)
	}
	return &Client{cfg: cfg, members: members, http: httpClient(cfg.TLS)}
}

// Close releases the idle connections to peers.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// ErrRegionUnavailable: a region a request needs (the one holding a task,
// a key's home, one asked for by a fan-out) did not answer. The region's
// name follows it in the wrapped error.
var ErrRegionUnavailable = errors.New("federation: region unavailable")

// KnownRegion reports whether name is a region of the federation (this
// server's region or one of config regions:). Nothing else is contacted.
func (c *Client) KnownRegion(name string) bool { return slices.Contains(c.members, name) }

// KnownRegions refuses a task's allowed regions that name a region outside
// the federation: a typo would otherwise read as "no pool matches".
func (c *Client) KnownRegions(names []string) error { return task.CheckRegions(names, c.members) }

// UnknownRegion is the error for a region name outside the federation: a
// client's mistake (400 naming the field), never "unavailable, retry".
func UnknownRegion(name string) error {
	return &task.FieldError{Field: "region", Msg: "no region " + strconv.Quote(name) + " in the federation"}
}

// API is the API address of a region to call now, or an error: a healthy
// one, or one whose figures are fresh again and that no request found
// unanswered (not suspected) while placement's unhealthy_grace has yet to
// trust it. A call for a task held there (get, trail, an action, a
// schedule's slot, a region's part of a fan-out) has nowhere else to go,
// and the grace is meant to keep placement from flapping, not calls.
func (c *Client) API(name string) (string, error) {
	if !c.KnownRegion(name) {
		return "", UnknownRegion(name)
	}
	r, ok := c.cfg.View.Region(name)
	if !ok || r.API == "" || !r.Healthy && (r.Stale || r.Suspect) {
		return "", fmt.Errorf("%w: %s", ErrRegionUnavailable, name)
	}
	return r.API, nil
}

// Forwarded counts a request forwarded to region target.
func (c *Client) Forwarded(target string) {
	c.cfg.Metrics.Forwarded.WithLabelValues(c.cfg.Region, target).Inc()
}

type hopsKey struct{}

// WithHops records in ctx how many servers the request being served has
// already passed through (its X-Ax-Forwarded header): calls to peers made
// while serving it carry one more.
func WithHops(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, hopsKey{}, n)
}

// HopsOf is the hop count WithHops recorded in ctx (0 when none).
func HopsOf(ctx context.Context) int { return hopsOf(ctx) }

func hopsOf(ctx context.Context) int {
	n, _ := ctx.Value(hopsKey{}).(int)
	return n
}

// Error is a non-2xx answer of another region's server.
type Error struct {
	Status int
	Body   apiv1.Error
}

func (e *Error) Error() string {
	return fmt.Sprintf("peer answered %d %s: %s", e.Status, e.Body.Code, e.Body.Message)
}

// BudgetExceeded reports whether the peer refused for its tenant's budget
// (429 budget_exceeded).
func (e *Error) BudgetExceeded() bool { return e.Body.Code == apiv1.CodeBudgetExceeded }

// HTTPStatus is the peer's answer's status, for the packages that reach
// peers through interfaces of their own and cannot name this type.
func (e *Error) HTTPStatus() int { return e.Status }

// httpClient is the HTTP client of calls to peers.
func httpClient(tc *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Peers are ax servers at their public_addr: a proxy from the
	// environment would see the cluster token.
	tr.Proxy = nil
	// A peer that does not complete a TCP handshake within DialTimeout is
	// not there (SYNs dropped: a partition): the request fails unsent
	// (ErrNotSent) in seconds, not at the request's deadline, so a hand-off
	// is placed elsewhere at once. DialTimeout outlasts one lost SYN (the
	// kernel resends it after 1 s) on any path shorter than 500 ms.
	tr.DialContext = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	// Hand-off batches, commits and forwarded reads run side by side to each
	// peer; a connection kept costs nothing, a new one a round trip more.
	tr.MaxIdleConnsPerHost = 32
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// DialTimeout bounds the TCP handshake of a call to a peer.
const DialTimeout = 1500 * time.Millisecond

// errInsecurePeer: the call would send the cluster token in clear text.
var errInsecurePeer = errors.New("refused to send the cluster token over plain http (give the peer https, or set auth.allow_insecure_peers)")

// insecure reports whether base is a plain-http peer the cluster token may
// not be sent to: off the loopback interface, unless the operator allowed it.
func (c *Client) insecure(base string) bool {
	if c.cfg.Token == "" || c.cfg.AllowInsecure {
		return false
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return err != nil
	}
	if h := u.Hostname(); h == "localhost" {
		return false
	} else if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return false
	}
	return true
}

// Call sends one JSON request to a peer with the cluster token; out may be
// nil. A non-2xx answer is an *Error; a request refused unsent, or that
// failed before any connection was handed to it (a dial refused or timed
// out, the context ending during the dial), wraps ErrNotSent.
func (c *Client) Call(ctx context.Context, base, method, path string, in, out any) (int, error) {
	if c.insecure(base) {
		c.cfg.Logger.Warn("peer call refused", "peer", base, "path", path, "err", errInsecurePeer)
		return 0, fmt.Errorf("%w: %s: %w", ErrNotSent, base, errInsecurePeer)
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// One more hop than the request being served: a chain of forwards ends
	// at maxHops even when two regions each think the other holds the task.
	req.Header.Set(apiv1.HeaderForwarded, strconv.Itoa(hopsOf(ctx)+1))
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	// The span in ctx (the request being served, a hand-off) is the
	// parent of the peer's server span.
	if tp := tracing.Traceparent(ctx); tp != "" {
		req.Header.Set("traceparent", tp)
	}
	var gotConn atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	}))
	resp, err := c.http.Do(req)
	if err != nil {
		if !gotConn.Load() {
			// No connection ever carried a byte of this request: it was
			// definitely not received, whatever the error says.
			return 0, fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var eb apiv1.ErrorBody
		_ = json.Unmarshal(b, &eb)
		return resp.StatusCode, &Error{Status: resp.StatusCode, Body: eb.Error}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("peer answer: %w", err)
		}
	}
	return resp.StatusCode, nil
}

// Home says where a request about id must go when this server does not
// hold the task: the home region named in the id, when another one.
func (c *Client) Home(id string) (string, bool) {
	p, err := task.ParseID(id)
	// An id of a region outside the federation names no task we can have:
	// not found (404), not "unavailable".
	if err != nil || p.Region == c.cfg.Region || !c.KnownRegion(p.Region) {
		return "", false
	}
	return p.Region, true
}

// Proxy forwards one request to another region's server (about a task,
// or a DAG run: package dag reaches other regions through it). An answer
// with an error status is an *Error; no answer at all is
// ErrRegionUnavailable.
func (c *Client) Proxy(ctx context.Context, regionName, method, path string, in, out any) error {
	api, err := c.API(regionName)
	if err != nil {
		return err
	}
	c.Forwarded(regionName)
	_, err = c.Call(ctx, api, method, path, in, out)
	var pe *Error
	if err != nil && !errors.As(err, &pe) {
		// No answer at all (refused, timed out): the region is unavailable
		// (503), not an internal error of this server.
		return fmt.Errorf("%w: %s: %v", ErrRegionUnavailable, regionName, err)
	}
	return err
}

// TaskPath is the API path of task id, with suffix ("/trail", "/cancel").
func TaskPath(id, suffix string) string { return "/v1/tasks/" + url.PathEscape(id) + suffix }

// NotFound reports whether err is a peer's 404.
func NotFound(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Status == http.StatusNotFound
}

// Unavailable reports whether err is a region that did not answer, or
// answered that it cannot serve right now (503: its store is down).
func Unavailable(err error) bool {
	var pe *Error
	return errors.Is(err, ErrRegionUnavailable) || errors.As(err, &pe) && pe.Status == http.StatusServiceUnavailable
}

// NeverSent reports whether err proves the request never left: the
// connection could not be made. Anything else (a timeout after connecting,
// a reset mid-answer) may have reached the target.
func NeverSent(err error) bool {
	var op *net.OpError
	// A failed TLS handshake sent nothing of the request either.
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	return errors.Is(err, ErrNotSent) || errors.As(err, &op) && op.Op == "dial" || errors.As(err, &cv) || errors.As(err, &rh)
}

// DialTimedOut reports whether err is a request never sent because the
// peer did not complete a TCP handshake in time: the path or the peer is
// down, not merely busy.
func DialTimedOut(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && op.Timeout()
}

// ErrNotSent: the request was not sent at all.
var ErrNotSent = errors.New("not sent")

// NoReply reports whether err is the lack of any answer (refused
// connection, timeout), as opposed to an answer that said "not now".
func NoReply(err error) bool {
	var pe *Error
	return err != nil && !errors.As(err, &pe)
}

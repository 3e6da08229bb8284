package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// DefaultHTTPTimeout bounds one request of the http handler.
const DefaultHTTPTimeout = 30 * time.Second

// HTTPOptions configure the http handler.
type HTTPOptions struct {
	// Allow lists the URL prefixes a payload may post to, e.g.
	// "https://hooks.example.com/" (required), each in its plain form (no
	// "..", no percent-encoded dots, no query). A URL is checked in its
	// clean form: parsed, its path's percent-encoding decoded and its dot
	// segments resolved, so "<prefix>../admin", "<prefix>%2e%2e/admin" and
	// "<prefix>..%2fadmin" are outside the prefix; the clean form is what
	// is sent. Scheme and host must be the prefix's exactly
	// ("https://a.example.com" does not allow "https://a.example.com.evil.net/"),
	// and the path must be the prefix's or below it at a '/'. Redirects go
	// through the same check.
	Allow []string
	// DenyPrivate refuses to connect to loopback, private (RFC 1918, ULA),
	// link-local (cloud metadata at 169.254.169.254), carrier-grade NAT,
	// multicast and other non-public addresses. The address is checked at
	// each connection, after DNS resolution, so a host name that resolves
	// to one, now or after a later re-resolution, is refused too. The
	// environment's HTTP(S)_PROXY is then not used (the check would see
	// the proxy, not the target).
	DenyPrivate bool
	// Timeout bounds one request, body included (default 30s).
	Timeout time.Duration
	// Transport sends the requests (default: a clone of
	// http.DefaultTransport). With DenyPrivate it must be an
	// *http.Transport (a clone of it is given the checking dialer).
	Transport http.RoundTripper
}

type httpPayload struct {
	URL  string          `json:"url"`
	Body json.RawMessage `json:"body"`
}

var errRedirectRefused = errors.New("redirect to a URL outside the allowlist")

// HTTP returns the http handler: it POSTs the payload's body as JSON to its
// url, with headers Idempotency-Key (the task id: the task may run more
// than once), X-Ax-Task-Id, X-Ax-Attempt and traceparent.
//
// A payload {"url": "https://hooks.example.com/x", "body": {...}} is sent
// if the url's clean form (percent-encoding decoded, dot segments resolved)
// lies under an allowlisted prefix; redirects are checked the same way, and
// DenyPrivate refuses internal addresses at connection time. 2xx succeeds
// with the last 4 KiB of the response; 4xx fails for good (NonRetryable)
// except 408, 425 and 429; 5xx and transport errors are retried. A 429 or
// 503 with Retry-After, or a 2xx, 429 or 503 whose JSON answer has
// "retry_after_seconds", is a worker.RetryAfter: the tenant's tasks of the
// key wait that long, no retry spent (docs/limits.md).
func HTTP(opts HTTPOptions) (worker.Handler, error) {
	if len(opts.Allow) == 0 {
		return nil, errors.New("http: Allow needs at least one URL prefix")
	}
	var allow []prefix
	for _, s := range opts.Allow {
		if err := CheckHTTPPrefix(s, opts.DenyPrivate); err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
		p, _ := parsePrefix(s)
		allow = append(allow, p)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultHTTPTimeout
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport.(*http.Transport)
	}
	if tr, ok := opts.Transport.(*http.Transport); ok {
		tr = tr.Clone()
		if opts.DenyPrivate {
			d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: denyPrivate}
			tr.DialContext, tr.Proxy = d.DialContext, nil
		}
		opts.Transport = tr
	} else if opts.DenyPrivate {
		return nil, errors.New("http: DenyPrivate needs an *http.Transport")
	}
	client := &http.Client{
		Transport: opts.Transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			u, err := target(allow, req.URL)
			if err != nil {
				return fmt.Errorf("%w: %v", errRedirectRefused, err)
			}
			req.URL = u // what was checked is what is sent
			return nil
		},
	}
	return func(ctx context.Context, t *worker.Task) error {
		var p httpPayload
		dec := json.NewDecoder(bytes.NewReader(t.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return worker.NonRetryable(fmt.Errorf(`http: payload must be {"url": URL, "body": JSON}: %v`, err))
		}
		u, err := url.Parse(p.URL)
		if err == nil {
			u, err = target(allow, u)
		}
		if err != nil {
			// Not the allowlist: a tenant learns nothing of where else
			// this worker may post.
			return worker.NonRetryable(fmt.Errorf("http: %q refused: %v", p.URL, err))
		}
		ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(p.Body))
		if err != nil {
			return worker.NonRetryable(fmt.Errorf("http: %v", err))
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", t.ID)
		req.Header.Set("X-Ax-Task-Id", t.ID)
		req.Header.Set("X-Ax-Attempt", strconv.Itoa(t.Attempt))
		// The attempt's span (worker tracing) is the target's parent; without
		// tracing, a span id of its own in the task's trace.
		if tp := tracing.Traceparent(ctx); tp != "" {
			req.Header.Set("traceparent", tp)
		} else if len(t.TraceID) == 32 {
			req.Header.Set("traceparent", "00-"+t.TraceID+"-"+spanID()+"-01")
		}
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, errRedirectRefused) || errors.Is(err, errPrivateTarget) {
				return worker.NonRetryable(fmt.Errorf("http: %v", err))
			}
			return fmt.Errorf("http: %w", err) // transport: retry
		}
		defer resp.Body.Close()
		body := newTail(tailBytes)
		_, rerr := io.Copy(body, resp.Body)
		code := resp.StatusCode
		if code >= 200 && code < 300 || code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			// The target asks to be called later: its key pauses for
			// every worker, and the task waits without spending a retry.
			if d, ok := retryAfter(resp, body.String(), time.Now()); ok {
				return worker.RetryAfter(d, errors.New(statusText(resp, body)))
			}
		}
		switch {
		case code >= 200 && code < 300:
			if rerr != nil {
				return fmt.Errorf("http: %s: reading the response: %w", resp.Status, rerr)
			}
			t.SetResult(body.String())
			return nil
		case code >= 500, code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests:
			return errors.New(statusText(resp, body))
		default:
			return worker.NonRetryable(errors.New(statusText(resp, body)))
		}
	}, nil
}

// retryAfter reads a target's "call me later": a JSON answer's
// retry_after_seconds (any of 2xx, 429, 503), else a 429's or 503's
// Retry-After header (seconds or an HTTP date).
func retryAfter(resp *http.Response, body string, now time.Time) (time.Duration, bool) {
	var ans struct {
		RetryAfterSeconds float64 `json:"retry_after_seconds"`
	}
	if strings.HasPrefix(strings.TrimSpace(body), "{") && json.Unmarshal([]byte(body), &ans) == nil && ans.RetryAfterSeconds > 0 {
		return time.Duration(ans.RetryAfterSeconds * float64(time.Second)), true
	}
	if resp.StatusCode < 300 {
		return 0, false
	}
	h := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if h == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(h, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second)), true
	}
	if at, err := http.ParseTime(h); err == nil && at.After(now) {
		return at.Sub(now), true
	}
	return 0, false
}

func statusText(resp *http.Response, body *tail) string {
	head := "http: " + resp.Request.URL.Redacted() + ": " + resp.Status
	if s := body.last(task.MaxErrorLen - len(head) - 2); s != "" {
		head += ": " + s
	}
	return head
}

func spanID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

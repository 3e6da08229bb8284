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
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// DefaultHTTPTimeout bounds one request of the http handler.
const DefaultHTTPTimeout = 30 * time.Second

// HTTPOptions configure the http handler.
type HTTPOptions struct {
	// Allow lists the URL prefixes a payload may post to, e.g.
	// "https://hooks.example.com/" (required). A prefix matches only up to
	// a boundary: "https://a.example.com" does not allow
	// "https://a.example.com.evil.net/". Redirects are checked too.
	Allow []string
	// Timeout bounds one request, body included (default 30s).
	Timeout time.Duration
	// Transport sends the requests (default: a clone of
	// http.DefaultTransport).
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
func HTTP(opts HTTPOptions) (worker.Handler, error) {
	if len(opts.Allow) == 0 {
		return nil, errors.New("http: Allow needs at least one URL prefix")
	}
	for _, p := range opts.Allow {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("http: allowed prefix %q is not an http(s) URL", p)
		}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultHTTPTimeout
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	allow := append([]string(nil), opts.Allow...)
	client := &http.Client{
		Transport: opts.Transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if !allowed(allow, req.URL.String()) {
				return fmt.Errorf("%w: %s", errRedirectRefused, req.URL.Redacted())
			}
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
		if !allowed(allow, p.URL) {
			return worker.NonRetryable(fmt.Errorf("http: %q does not start with an allowed prefix (%s)", p.URL, strings.Join(allow, ", ")))
		}
		ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(p.Body))
		if err != nil {
			return worker.NonRetryable(fmt.Errorf("http: %v", err))
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", t.ID)
		req.Header.Set("X-Ax-Task-Id", t.ID)
		req.Header.Set("X-Ax-Attempt", strconv.Itoa(t.Attempt))
		if len(t.TraceID) == 32 {
			req.Header.Set("traceparent", "00-"+t.TraceID+"-"+spanID()+"-01")
		}
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, errRedirectRefused) {
				return worker.NonRetryable(fmt.Errorf("http: %v", err))
			}
			return fmt.Errorf("http: %w", err) // transport: retry
		}
		defer resp.Body.Close()
		body := newTail(tailBytes)
		_, rerr := io.Copy(body, resp.Body)
		switch code := resp.StatusCode; {
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

func statusText(resp *http.Response, body *tail) string {
	head := "http: " + resp.Request.URL.Redacted() + ": " + resp.Status
	if s := body.last(task.MaxErrorLen - len(head) - 2); s != "" {
		head += ": " + s
	}
	return head
}

// allowed reports whether u starts with one of the prefixes at a boundary:
// the prefix ends in '/', or u continues with '/', '?', '#' or ends there.
func allowed(prefixes []string, u string) bool {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.User != nil {
		return false
	}
	for _, p := range prefixes {
		if !strings.HasPrefix(u, p) {
			continue
		}
		if len(u) == len(p) || strings.HasSuffix(p, "/") || strings.ContainsRune("/?#", rune(u[len(p)])) {
			return true
		}
	}
	return false
}

func spanID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

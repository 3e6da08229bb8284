package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultUserAgent is sent unless WithUserAgent says otherwise.
const DefaultUserAgent = "ax-go-client"

// maxBody bounds what the client reads of one answer: a batch answer of
// MaxBatch items is well under 1 MiB; a full page of tasks with 1 MiB
// payloads is not, hence the margin.
const maxBody = 256 << 20

// Client calls one ax server. It is safe for concurrent use. Any server of
// any region answers for every task (ids carry their home region and the
// server forwards). Every call takes a context first and honours it: cancel
// it to abandon the request. The Client sets no overall timeout of its own,
// because Events is a long poll; bound calls with ctx, or give an
// *http.Client with WithHTTPClient. DAGs and schedules pass through as
// json.RawMessage: the client adds nothing to them.
type Client struct {
	base      *url.URL
	http      *http.Client
	token     string
	userAgent string
	// sleep waits d or until ctx ends; tests replace it so that Retry-After
	// waits take no time.
	sleep func(ctx context.Context, d time.Duration) error
}

// An Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" with every request.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithHTTPClient sets the HTTP client (transport, TLS, proxies, timeouts).
// nil keeps the default, which has no timeout of its own.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// New returns a client of the server at baseURL ("http://127.0.0.1:8080";
// a bare host:port is taken as http). A path in baseURL is kept as a
// prefix, for servers behind a reverse proxy.
func New(baseURL string, opts ...Option) (*Client, error) {
	raw := strings.TrimSpace(baseURL)
	if raw == "" {
		return nil, errors.New("client: empty API address")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("client: API address %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: API address %q: want http(s)://host[:port]", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{
		base:      u,
		http:      &http.Client{},
		userAgent: DefaultUserAgent,
		sleep:     sleepCtx,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL is the server address the client calls.
func (c *Client) BaseURL() string { return c.base.String() }

// do sends one request and, on a 2xx answer, decodes its body into out
// (when out is non-nil and the body is not empty). in is encoded as JSON
// unless it is nil; a json.RawMessage is sent as it is. It returns the
// status so callers can tell 200 from 201.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) (int, error) {
	var (
		body io.Reader
		err  error
	)
	if in != nil {
		b, ok := in.(json.RawMessage)
		if !ok {
			if b, err = json.Marshal(in); err != nil {
				return 0, fmt.Errorf("%s %s: encode request: %w", method, path, err)
			}
		}
		body = bytes.NewReader(b)
	}
	// path arrives escaped (taskPath); RawPath keeps an escaped "/" in an
	// id from turning into a separator.
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Do wraps ctx errors in *url.Error; errors.Is still finds them.
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeError(resp, data)
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = append(json.RawMessage(nil), data...)
			return resp.StatusCode, nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer (HTTP %d): %w", method, path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode, nil
}

// taskPath is /v1/tasks/{id}[/suffix] with id escaped.
func taskPath(id string, suffix ...string) string {
	p := "/v1/tasks/" + url.PathEscape(id)
	for _, s := range suffix {
		p += "/" + s
	}
	return p
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

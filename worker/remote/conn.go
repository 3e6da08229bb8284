package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Error is an answer of the API that is neither a success nor worth a
// retry: a 4xx with the API's code, message and field.
type Error struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// conn sends the protocol's requests to one of its URLs, moving to the
// next one on a connection error or a 503, and retrying those, 429s and
// other 5xx with backoff and jitter (at least the answer's Retry-After)
// until ctx ends.
type conn struct {
	urls  []string
	cur   atomic.Int64 // index of the URL in use
	auth  string
	hc    *http.Client
	onErr func(url string, err error, attempt int)
}

// do sends body (nil: none) as JSON and decodes a 2xx answer into out
// (nil: discard it). Any other answer is an *Error once no retry applies.
func (c *conn) do(ctx context.Context, method, path string, body, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		i := c.cur.Load()
		base := c.urls[int(i)%len(c.urls)]
		wait, err := c.once(ctx, method, base+path, raw, out)
		if err == nil {
			return nil
		}
		var api *Error
		if errors.As(err, &api) && wait == 0 {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w (last: %v)", method, path, ctx.Err(), err)
		}
		if api == nil || api.Status == http.StatusServiceUnavailable || api.Status == http.StatusBadGateway || api.Status == http.StatusGatewayTimeout {
			// This server cannot serve now: the next one may.
			c.cur.CompareAndSwap(i, i+1)
		}
		if c.onErr != nil {
			c.onErr(base, err, attempt)
		}
		wait = max(wait, backoff(attempt))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s %s: %w (last: %v)", method, path, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// once sends one request. wait > 0 asks for a retry after it (a connection
// error, 429 or 5xx); an *Error with wait 0 is final.
func (c *conn) once(ctx context.Context, method, url string, raw []byte, out any) (time.Duration, error) {
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", c.auth)
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return time.Millisecond, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if out == nil || resp.StatusCode == http.StatusNoContent {
			_, _ = io.Copy(io.Discard, resp.Body)
			return 0, nil
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return time.Millisecond, fmt.Errorf("%s %s: reading the answer: %w", method, url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb errorBody
	_ = json.Unmarshal(b, &eb)
	if eb.Code == "" {
		eb.Code, eb.Message = http.StatusText(resp.StatusCode), string(bytes.TrimSpace(b))
	}
	apiErr := &Error{Status: resp.StatusCode, Code: eb.Code, Message: eb.Message, Field: eb.Field}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return max(retryAfter(resp.Header.Get("Retry-After")), time.Millisecond), apiErr
	}
	return 0, apiErr
}

// retryAfter reads a Retry-After of whole seconds (0 when absent or not
// a number).
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(h)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(min(n, 300)) * time.Second
}

// backoff is the wait before retry number attempt (from 1): 50ms doubling
// up to 2s, jittered over its upper half so workers do not retry in step.
func backoff(attempt int) time.Duration {
	d := min(50*time.Millisecond<<min(max(attempt-1, 0), 6), 2*time.Second)
	return d/2 + rand.N(d/2+1)
}

// errorBody is the API's error answer.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// Sentinels for errors.Is on an *APIError. Each matches the error code of
// the body, or the HTTP status when the body has no known code.
var (
	ErrInvalid      = errors.New("client: invalid request")       // 400 invalid_argument
	ErrUnauthorized = errors.New("client: unauthenticated")       // 401
	ErrForbidden    = errors.New("client: permission denied")     // 403
	ErrNotFound     = errors.New("client: not found")             // 404
	ErrConflict     = errors.New("client: conflict")              // 409 conflict or failed_precondition
	ErrTooLarge     = errors.New("client: payload too large")     // 413, or 431 for the headers
	ErrUnplaceable  = errors.New("client: unplaceable")           // 422, with an Explanation
	ErrSaturated    = errors.New("client: saturated")             // 429, with RetryAfter
	ErrUnavailable  = errors.New("client: unavailable")           // 503
	ErrInternal     = errors.New("client: internal server error") // 500
)

// sentinels maps each sentinel to the codes and the statuses it stands for.
var sentinels = []struct {
	err      error
	codes    []string
	statuses []int
}{
	{ErrInvalid, []string{apiv1.CodeInvalid}, []int{http.StatusBadRequest}},
	{ErrUnauthorized, []string{apiv1.CodeUnauthorized}, []int{http.StatusUnauthorized}},
	{ErrForbidden, []string{apiv1.CodeForbidden}, []int{http.StatusForbidden}},
	{ErrNotFound, []string{apiv1.CodeNotFound}, []int{http.StatusNotFound}},
	{ErrConflict, []string{apiv1.CodeConflict, apiv1.CodeFailedPrecond}, []int{http.StatusConflict}},
	{ErrTooLarge, []string{apiv1.CodeTooLarge, apiv1.CodeHeadersTooLarge}, []int{http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge}},
	{ErrUnplaceable, []string{apiv1.CodeUnplaceable}, []int{http.StatusUnprocessableEntity}},
	{ErrSaturated, []string{apiv1.CodeSaturated}, []int{http.StatusTooManyRequests}},
	{ErrUnavailable, []string{apiv1.CodeUnavailable, apiv1.CodeBadGateway}, []int{http.StatusServiceUnavailable}},
	{ErrInternal, []string{apiv1.CodeInternal}, []int{http.StatusInternalServerError}},
}

// APIError is a non-2xx answer of the server: the HTTP status, the error
// code, message and field of the body {"error":{...}}, the Retry-After delay
// and, on 422, the placement explanation. Match kinds with errors.Is against
// the sentinels (ErrNotFound, ErrConflict, ErrSaturated, ...), read the
// details with errors.As:
//
//	_, err := c.Submit(ctx, spec)
//	var apiErr *client.APIError
//	switch {
//	case errors.Is(err, client.ErrSaturated) && errors.As(err, &apiErr):
//		time.Sleep(apiErr.RetryAfter)
//	case errors.Is(err, client.ErrInvalid):
//		// fix the spec: apiErr.Field names the offending field
//	}
//
// A body that is not the JSON error shape (a proxy's HTML page) still gives
// an APIError with the status and the start of the body as the message.
// Transport failures and context errors are returned wrapped, as they are.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the body's error code (apiv1.Code*); empty when the body was
	// not the JSON error shape.
	Code string
	// Message is the server's message, or the start of a non-JSON body.
	Message string
	// Field names the offending spec field of a 400, when known.
	Field string
	// RetryAfter is the server's Retry-After (header, else body) on 429 and
	// 503; zero when it gave none.
	RetryAfter time.Duration
	// Explanation is why no pool could take the task, on 422.
	Explanation *apiv1.Explanation
}

// Error is one line: the message, the field, the retry delay.
func (e *APIError) Error() string {
	var b strings.Builder
	switch {
	case e.Message != "":
		b.WriteString(e.Message)
	case e.Code != "":
		b.WriteString(strings.ReplaceAll(e.Code, "_", " "))
	default:
		fmt.Fprintf(&b, "HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Is matches the sentinels: by code when the server gave a known one, else
// by status.
func (e *APIError) Is(target error) bool {
	for _, s := range sentinels {
		if s.err != target {
			continue
		}
		for _, c := range s.codes {
			if e.Code == c {
				return true
			}
		}
		return !e.knownCode() && slices.Contains(s.statuses, e.Status)
	}
	return false
}

func (e *APIError) knownCode() bool {
	for _, s := range sentinels {
		for _, c := range s.codes {
			if e.Code == c {
				return true
			}
		}
	}
	return false
}

// Temporary reports whether the same request may succeed later unchanged:
// 429, 502, 503, 504.
func (e *APIError) Temporary() bool {
	switch e.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// decodeError builds the APIError of a non-2xx answer.
func decodeError(resp *http.Response, body []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	var eb apiv1.ErrorBody
	if err := json.Unmarshal(body, &eb); err == nil && (eb.Error.Code != "" || eb.Error.Message != "") {
		e.Code = eb.Error.Code
		e.Message = eb.Error.Message
		e.Field = eb.Error.Field
		e.Explanation = eb.Error.Explanation
		e.RetryAfter = time.Duration(eb.Error.RetryAfterSeconds) * time.Second
	} else {
		e.Message = snippet(body)
		if e.Message != "" {
			e.Message = fmt.Sprintf("HTTP %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
		}
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		e.RetryAfter = d
	}
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d.Round(time.Second), true
	}
	return 0, false
}

// snippet is the start of a non-JSON body on one line: enough to recognise
// a proxy's error page, short enough for a terminal.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	const max = 200
	if len(s) > max {
		// Cut on a rune boundary.
		r := []rune(s)
		if len(r) > max {
			s = string(r[:max]) + "…"
		}
	}
	return s
}

package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/submit"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
)

// A real Redis' OOM error (whose text names the Lua script's hash and line)
// is a 503 with Retry-After and a generic message; any other unexpected
// error is a generic 500 with a correlation id, its text only in the log.
func TestStoreErrorsAreNotShown(t *testing.T) {
	rd := testenv.StartRedis(t)
	c := rd.Client()
	ctx := t.Context()
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	oom := c.Eval(ctx, "return redis.call('SET', KEYS[1], ARGV[1])", []string{"k"}, strings.Repeat("x", 1000)).Err()
	if oom == nil || !strings.Contains(oom.Error(), "OOM") {
		t.Fatalf("no OOM from a Redis at maxmemory 1: %v", oom)
	}
	e := ErrorOf(fmt.Errorf("submit: %w", oom))
	if e.Status() != 503 || e.Code != apiv1.CodeUnavailable || e.RetryAfter <= 0 {
		t.Fatalf("OOM: %+v", e)
	}
	if strings.Contains(e.Msg, "OOM") || strings.Contains(e.Msg, "script") || !strings.Contains(e.Msg, "ref "+e.Ref) ||
		!strings.Contains(e.Detail, "OOM") {
		t.Fatalf("OOM message %q, detail %q", e.Msg, e.Detail)
	}
	e = ErrorOf(errors.New("f_3a9c… line 12: user_script secret detail"))
	if e.Status() != 500 || strings.Contains(e.Msg, "secret") || !strings.HasPrefix(e.Msg, "internal error (ref ") || e.Ref == "" {
		t.Fatalf("500: %+v", e)
	}
}

// Another region's 503 (the holder's Redis out) reaches the caller with
// its Retry-After header, not only retry_after_seconds in the body (a GET
// of a handed-off task while its holder's Redis was paused had none).
func TestPeerRetryAfterIsAHeader(t *testing.T) {
	body := apiv1.Error{Code: apiv1.CodeUnavailable, Message: "the task store is unavailable, retry later (ref x)", RetryAfterSeconds: 5}
	rec := httptest.NewRecorder()
	WriteError(rec, fmt.Errorf("get: %w", &peer.Error{Status: 503, Body: body}))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "5" || !strings.Contains(rec.Body.String(), `"retry_after_seconds":5`) {
		t.Fatalf("peer 503: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}

// Every 429 and 503 tells the client when to come back, within seconds
// to minutes: never 0 (a client hammering at once), never hours (a client
// giving up on work that would fit soon), another region's answer
// included; other statuses carry none unless they set one.
func TestRetryAfterOf429And503IsBounded(t *testing.T) {
	peerErr := func(status int, code string, secs int) error {
		return &peer.Error{Status: status, Body: apiv1.Error{Code: code, Message: "m", RetryAfterSeconds: secs}}
	}
	for _, c := range []struct {
		name   string
		err    error
		status int
		want   string
	}{
		{"rate with no wait", &submit.RateError{Wait: 0}, 429, "1"},
		{"rate of 300 ms", &submit.RateError{Wait: 300 * time.Millisecond}, 429, "1"},
		{"rate of 2.5 s", &submit.RateError{Wait: 2500 * time.Millisecond}, 429, "3"},
		{"rate of a day", &submit.RateError{Wait: 24 * time.Hour}, 429, "300"},
		{"budget", &budget.BudgetError{Tenant: "t", RetryAfter: 30 * time.Second}, 429, "30"},
		{"budget without a refresh", &budget.BudgetError{Tenant: "t"}, 429, "1"},
		{"deadline", context.DeadlineExceeded, 503, "1"},
		{"peer 503 of 0 s", peerErr(503, apiv1.CodeUnavailable, 0), 503, "1"},
		{"peer 429 of hours", peerErr(429, apiv1.CodeSaturated, 7200), 429, "300"},
		{"peer 404", peerErr(404, apiv1.CodeNotFound, 0), 404, ""},
		{"invalid", &task.FieldError{Field: "type", Msg: "bad"}, 400, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			WriteError(w, c.err)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d", w.Code, c.status)
			}
			if got := w.Header().Get("Retry-After"); got != c.want {
				t.Errorf("Retry-After %q, want %q", got, c.want)
			}
			var body apiv1.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if got := strconv.Itoa(body.Error.RetryAfterSeconds); c.want != "" && got != c.want || c.want == "" && body.Error.RetryAfterSeconds != 0 {
				t.Errorf("retry_after_seconds %d, header %q", body.Error.RetryAfterSeconds, c.want)
			}
		})
	}
}

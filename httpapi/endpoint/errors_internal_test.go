package endpoint

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/internal/testenv"
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

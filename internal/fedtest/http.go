package fedtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// Spec is a task spec (or any JSON object) as a test writes it.
type Spec = map[string]any

// Eventually polls cond every 20 ms until it holds or within passes (then
// the test fails, naming what). It returns how long it waited.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// Ctx is a context that ends after a minute or with the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Reply is one HTTP answer.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Call sends one request with c. body is sent as is when it is []byte or
// string, else as JSON; nil sends no body. token "" sends no
// Authorization.
func Call(t testing.TB, c *http.Client, method, url, token string, body any) Reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// CheckErrorShape fails the test unless rep is an error of the API's one
// shape: {"error":{"code","message"[,"field"]}}, as JSON.
func CheckErrorShape(t testing.TB, what string, rep Reply) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(rep.Body, &raw); err != nil {
		t.Fatalf("%s: %d with a body that is not a JSON object: %q", what, rep.Status, rep.Body)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(raw["error"], &inner); err != nil || len(raw) != 1 {
		t.Fatalf("%s: %d: body is not {\"error\":{...}}: %s", what, rep.Status, rep.Body)
	}
	var e apiv1.Error
	_ = json.Unmarshal(raw["error"], &e)
	if e.Code == "" || e.Message == "" {
		t.Fatalf("%s: %d: error without code or message: %s", what, rep.Status, rep.Body)
	}
	if ct := rep.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: %d: Content-Type %q", what, rep.Status, ct)
	}
}

// WriteJSON answers v as JSON with status, as the API does (an
// interceptor's stand-in answers).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// JSON decodes the body into v.
func (rep Reply) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(rep.Body, v); err != nil {
		t.Fatalf("decode %q: %v", rep.Body, err)
	}
}

// Err is the error of a non-2xx answer.
func (rep Reply) Err(t testing.TB) apiv1.Error {
	t.Helper()
	var eb apiv1.ErrorBody
	rep.JSON(t, &eb)
	if eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("not an error body: %s", rep.Body)
	}
	return eb.Error
}

// Want fails unless the status is status.
func (rep Reply) Want(t testing.TB, status int) Reply {
	t.Helper()
	if rep.Status != status {
		t.Fatalf("status %d, want %d: %s", rep.Status, status, rep.Body)
	}
	return rep
}

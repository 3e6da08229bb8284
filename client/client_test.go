package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// request is what the fake server saw.
type request struct {
	Method, Path, Query, Body, Auth, UserAgent, ContentType string
}

// fake serves canned answers and records requests.
type fake struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	seen   []request
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) (*fake, *Client) {
	t.Helper()
	f := &fake{t: t, handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, request{
			Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: string(b),
			Auth: r.Header.Get("Authorization"), UserAgent: r.Header.Get("User-Agent"),
			ContentType: r.Header.Get("Content-Type"),
		})
		f.mu.Unlock()
		f.handle(w, r, b)
	}))
	t.Cleanup(f.srv.Close)
	c, err := New(f.srv.URL, WithToken("s3cret"), WithHTTPClient(f.srv.Client()), WithUserAgent("ax-test"))
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func (f *fake) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.seen...)
}

// reply answers status with body as JSON.
func reply(status int, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ptr[T any](v T) *T { return &v }

// Every call: method, path, query, body, headers, and the decoded answer.
func TestCalls(t *testing.T) {
	prio := 1
	spec := &task.Spec{Type: "report.generate", Priority: &prio, Tags: map[string]string{"gpu": "a100"}}
	cases := []struct {
		name   string
		call   func(context.Context, *Client) (any, error)
		answer string
		want   request // Auth, UserAgent filled in below
		result any
	}{
		{
			name:   "submit",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Submit(ctx, spec) },
			answer: `{"id":"t1","state":"READY","region":"eu-west","pool":"cpu"}`,
			want:   request{Method: "POST", Path: "/v1/tasks", Body: `{"type":"report.generate","priority":1,"tags":{"gpu":"a100"}}`},
			result: &apiv1.SubmitResponse{ID: "t1", State: task.Ready, Region: "eu-west", Pool: ptr("cpu")},
		},
		{
			name:   "get escapes the id",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Get(ctx, "eu/1 x") },
			answer: `{"id":"eu/1 x","type":"a","state":"RUNNING","attempts":2}`,
			want:   request{Method: "GET", Path: "/v1/tasks/eu%2F1%20x"},
			result: &task.Task{ID: "eu/1 x", Type: "a", State: task.Running, Attempts: 2},
		},
		{
			name:   "trail",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Trail(ctx, "t1") },
			answer: `{"id":"t1","transitions":[{"ts":"2026-01-02T03:04:05Z","to":"PENDING","reason":"SUBMITTED","attempt":0}]}`,
			want:   request{Method: "GET", Path: "/v1/tasks/t1/trail"},
			result: &apiv1.TrailResponse{ID: "t1", Transitions: []task.Transition{{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), To: task.Pending, Reason: "SUBMITTED"}}},
		},
		{
			name:   "cancel",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Cancel(ctx, "t1") },
			answer: `{"id":"t1","state":"RUNNING","requested":true}`,
			want:   request{Method: "POST", Path: "/v1/tasks/t1/cancel"},
			result: &apiv1.CancelResponse{ID: "t1", State: task.Running, Requested: true},
		},
		{
			name:   "replay",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Replay(ctx, "t1") },
			answer: `{"id":"t1","state":"PENDING","type":"a","attempts":5}`, // a whole task reads the same
			want:   request{Method: "POST", Path: "/v1/tasks/t1/replay"},
			result: &apiv1.TaskUpdate{ID: "t1", State: task.Pending},
		},
		{
			name:   "priority",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.SetPriority(ctx, "t1", 0) },
			answer: `{"id":"t1","state":"READY","priority":0}`,
			want:   request{Method: "POST", Path: "/v1/tasks/t1/priority", Body: `{"priority":0}`},
			result: &apiv1.TaskUpdate{ID: "t1", State: task.Ready, Priority: ptr(0)},
		},
		{
			name: "bulk cancel",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.BulkCancel(ctx, apiv1.BulkCancelRequest{Type: "x", State: task.Ready})
			},
			answer: `{"canceled":7}`,
			want:   request{Method: "POST", Path: "/v1/tasks/cancel", Body: `{"type":"x","state":"READY"}`},
			result: &apiv1.BulkCancelResponse{Canceled: 7},
		},
		{
			name: "dead letters with a filter",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.DeadLetters(ctx, DeadLetterFilter{Type: "a.b", Tenant: "acme", Limit: 50, Offset: 100})
			},
			answer: `{"tasks":[{"id":"t9","type":"a.b","state":"FAILED","last_error":"boom"}]}`,
			want:   request{Method: "GET", Path: "/v1/dlq", Query: "limit=50&offset=100&tenant=acme&type=a.b"},
			result: &apiv1.TaskList{Tasks: []*task.Task{{ID: "t9", Type: "a.b", State: task.Failed, LastError: "boom"}}},
		},
		{
			name: "bulk cancel in every region, one unavailable",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.BulkCancel(ctx, apiv1.BulkCancelRequest{Type: "x", Region: "eu-west"})
			},
			answer: `{"canceled":3,"regions":[{"region":"eu-west","count":3},{"region":"us-east","count":0,"error":{"code":"unavailable","message":"down"}}],"unavailable":["us-east"]}`,
			want:   request{Method: "POST", Path: "/v1/tasks/cancel", Body: `{"type":"x","region":"eu-west"}`},
			result: &apiv1.BulkCancelResponse{Canceled: 3, Unavailable: []string{"us-east"}, Regions: []apiv1.RegionOutcome{
				{Region: "eu-west", Count: 3}, {Region: "us-east", Error: &apiv1.Error{Code: apiv1.CodeUnavailable, Message: "down"}}}},
		},
		{
			name: "dead letters of one region, from a cursor",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.DeadLetters(ctx, DeadLetterFilter{Region: "eu-west", Cursor: "MTox", Limit: 1})
			},
			answer: `{"tasks":[{"id":"t9","state":"FAILED","held_by":"eu-west"}],"next_cursor":"MToy","regions":[{"region":"eu-west","count":1}],"unavailable":[]}`,
			want:   request{Method: "GET", Path: "/v1/dlq", Query: "cursor=MTox&limit=1&region=eu-west"},
			result: &apiv1.TaskList{Tasks: []*task.Task{{ID: "t9", State: task.Failed, HeldBy: "eu-west"}}, NextCursor: "MToy",
				Regions: []apiv1.RegionOutcome{{Region: "eu-west", Count: 1}}, Unavailable: []string{}},
		},
		{
			name:   "dead letters without a filter",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.DeadLetters(ctx, DeadLetterFilter{}) },
			answer: `{"tasks":[]}`,
			want:   request{Method: "GET", Path: "/v1/dlq"},
			result: &apiv1.TaskList{Tasks: []*task.Task{}},
		},
		{
			name:   "regions",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Regions(ctx) },
			answer: `{"regions":[{"name":"eu-west","leader":"s1","healthy":true,"updated_at":"2026-01-02T03:04:05Z","pools":[{"name":"cpu","slots":8,"queue_fill":0.5}]}],"global_view":true}`,
			want:   request{Method: "GET", Path: "/v1/regions"},
			result: &apiv1.RegionsResponse{GlobalView: true, Regions: []apiv1.RegionStatus{{
				Name: "eu-west", Leader: "s1", Healthy: true, UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
				Pools: []apiv1.PoolStatus{{Name: "cpu", Slots: 8, QueueFill: 0.5}},
			}}},
		},
		{
			name:   "drain",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Drain(ctx, "eu-west") },
			answer: `{"region":"eu-west","moved":12}`,
			want:   request{Method: "POST", Path: "/v1/regions/eu-west/drain"},
			result: &apiv1.DrainResponse{Region: "eu-west", Moved: 12},
		},
		{
			name:   "explain",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Explain(ctx, &task.Spec{Type: "a"}) },
			answer: `{"outcome":"PLACED","chosen":{"region":"r","pool":"p","chosen":true},"candidates":[{"region":"r","pool":"p","chosen":true},{"region":"r","pool":"q","rejected":"TAG_MISMATCH"}]}`,
			want:   request{Method: "POST", Path: "/v1/placement/explain", Body: `{"type":"a"}`},
			result: &apiv1.Explanation{
				Outcome:    "PLACED",
				Chosen:     &apiv1.Candidate{Region: "r", Pool: "p", Chosen: true},
				Candidates: []apiv1.Candidate{{Region: "r", Pool: "p", Chosen: true}, {Region: "r", Pool: "q", Rejected: "TAG_MISMATCH"}},
			},
		},
		{
			name: "events",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Events(ctx, "eu-west", "1-0,2-0", 15*time.Second)
			},
			answer: `{"region":"eu-west","events":[{"id":"3-0","shard":0,"op":"claim","n":2,"tasks":["a","b"]}],"next":"3-0,2-0"}`,
			want:   request{Method: "GET", Path: "/v1/events", Query: "after=1-0%2C2-0&region=eu-west&wait=15s"},
			result: &apiv1.EventsResponse{Region: "eu-west", Next: "3-0,2-0", Events: []task.Event{{ID: "3-0", Op: "claim", N: 2, Tasks: []string{"a", "b"}}}},
		},
		{
			name: "submit dag",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.SubmitDAG(ctx, json.RawMessage(`{"nodes":[]}`))
			},
			answer: `{"id":"d1"}`,
			want:   request{Method: "POST", Path: "/v1/dags", Body: `{"nodes":[]}`},
			result: json.RawMessage(`{"id":"d1"}`),
		},
		{
			name:   "get dag",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetDAG(ctx, "d1") },
			answer: `{"id":"d1","state":"RUNNING"}`,
			want:   request{Method: "GET", Path: "/v1/dags/d1"},
			result: json.RawMessage(`{"id":"d1","state":"RUNNING"}`),
		},
		{
			name:   "cancel dag",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CancelDAG(ctx, "d1") },
			answer: `{"id":"d1","state":"RUNNING","cancel_requested_at":"2026-01-02T03:04:05Z"}`,
			want:   request{Method: "POST", Path: "/v1/dags/d1/cancel"},
			result: json.RawMessage(`{"id":"d1","state":"RUNNING","cancel_requested_at":"2026-01-02T03:04:05Z"}`),
		},
		{
			name: "create schedule",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSchedule(ctx, json.RawMessage(`{"name":"n","cron":"0 * * * * *"}`))
			},
			answer: `{"name":"n"}`,
			want:   request{Method: "POST", Path: "/v1/schedules", Body: `{"name":"n","cron":"0 * * * * *"}`},
			result: json.RawMessage(`{"name":"n"}`),
		},
		{
			name:   "list schedules",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListSchedules(ctx) },
			answer: `{"schedules":[]}`,
			want:   request{Method: "GET", Path: "/v1/schedules"},
			result: json.RawMessage(`{"schedules":[]}`),
		},
		{
			name:   "get schedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetSchedule(ctx, "nightly") },
			answer: `{"name":"nightly"}`,
			want:   request{Method: "GET", Path: "/v1/schedules/nightly"},
			result: json.RawMessage(`{"name":"nightly"}`),
		},
		{
			name:   "pause schedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.PauseSchedule(ctx, "nightly") },
			want:   request{Method: "POST", Path: "/v1/schedules/nightly/pause"},
			result: json.RawMessage(nil),
		},
		{
			name:   "resume schedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ResumeSchedule(ctx, "nightly") },
			answer: `{"name":"nightly","paused":false}`,
			want:   request{Method: "POST", Path: "/v1/schedules/nightly/resume"},
			result: json.RawMessage(`{"name":"nightly","paused":false}`),
		},
		{
			name:   "delete schedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteSchedule(ctx, "nightly") },
			want:   request{Method: "DELETE", Path: "/v1/schedules/nightly"},
			result: nil,
		},
		{
			name:   "schedules of a tenant",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListSchedulesOf(ctx, "acme") },
			answer: `{"schedules":[]}`,
			want:   request{Method: "GET", Path: "/v1/schedules", Query: "tenant=acme"},
			result: json.RawMessage(`{"schedules":[]}`),
		},
		{
			name:   "a tenant's schedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.PauseScheduleOf(ctx, "acme", "nightly") },
			answer: `{"name":"nightly","paused":true}`,
			want:   request{Method: "POST", Path: "/v1/schedules/nightly/pause", Query: "tenant=acme"},
			result: json.RawMessage(`{"name":"nightly","paused":true}`),
		},
		{
			name: "delete a tenant's schedule",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.DeleteScheduleOf(ctx, "a b", "nightly")
			},
			want:   request{Method: "DELETE", Path: "/v1/schedules/nightly", Query: "tenant=a+b"},
			result: nil,
		},
		{
			name:   "health",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.Health(ctx) },
			answer: "ok",
			want:   request{Method: "GET", Path: "/healthz"},
		},
		{
			name: "ready",
			call: func(ctx context.Context, c *Client) (any, error) { return nil, c.Ready(ctx) },
			want: request{Method: "GET", Path: "/readyz"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := http.StatusOK
			if tc.name == "submit" {
				status = http.StatusCreated
			}
			if tc.answer == "" && tc.want.Method != "GET" {
				status = http.StatusNoContent
			}
			f, c := newFake(t, reply(status, tc.answer))
			got, err := tc.call(ctxT(t), c)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Auth, want.UserAgent = "Bearer s3cret", "ax-test"
			if want.Body != "" {
				want.ContentType = "application/json"
			}
			if diff := cmp.Diff([]request{want}, f.requests()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.result, got); tc.result != nil && diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubmitDuplicate(t *testing.T) {
	for _, tc := range []struct {
		status int
		dup    bool
	}{{http.StatusCreated, false}, {http.StatusOK, true}} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			_, c := newFake(t, reply(tc.status, `{"id":"t1","state":"PENDING","region":"r","pool":null}`))
			got, err := c.Submit(ctxT(t), &task.Spec{Type: "a", IdempotencyKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if got.Duplicate != tc.dup || got.Pool != nil {
				t.Errorf("got %+v, want duplicate=%v and no pool", got, tc.dup)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name    string
		status  int
		header  map[string]string
		body    string
		want    *APIError
		is      []error
		isNot   []error
		message string
	}{
		{
			name:    "invalid with a field",
			status:  400,
			body:    `{"error":{"code":"invalid_argument","message":"priority: must be between 0 and 4","field":"priority"}}`,
			want:    &APIError{Status: 400, Code: "invalid_argument", Message: "priority: must be between 0 and 4", Field: "priority"},
			is:      []error{ErrInvalid},
			isNot:   []error{ErrNotFound, ErrConflict},
			message: "priority: must be between 0 and 4 (field priority)",
		},
		{
			name:   "not found",
			status: 404,
			body:   `{"error":{"code":"not_found","message":"no task t1"}}`,
			want:   &APIError{Status: 404, Code: "not_found", Message: "no task t1"},
			is:     []error{ErrNotFound},
		},
		{
			name:    "headers too large, the JSON 431",
			status:  431,
			body:    `{"error":{"code":"headers_too_large","message":"request headers are 9000 bytes, over 8192","field":"X-Pad"}}`,
			want:    &APIError{Status: 431, Code: "headers_too_large", Message: "request headers are 9000 bytes, over 8192", Field: "X-Pad"},
			is:      []error{ErrTooLarge},
			isNot:   []error{ErrInvalid},
			message: "request headers are 9000 bytes, over 8192 (field X-Pad)",
		},
		{
			name:   "headers too large, Go's plain 431",
			status: 431,
			body:   "431 Request Header Fields Too Large",
			want:   &APIError{Status: 431, Message: "HTTP 431 Request Header Fields Too Large: 431 Request Header Fields Too Large"},
			is:     []error{ErrTooLarge},
		},
		{
			name:   "failed precondition is a conflict",
			status: 409,
			body:   `{"error":{"code":"failed_precondition","message":"task is SUCCESS"}}`,
			want:   &APIError{Status: 409, Code: "failed_precondition", Message: "task is SUCCESS"},
			is:     []error{ErrConflict},
		},
		{
			name:    "saturated with Retry-After seconds",
			status:  429,
			header:  map[string]string{"Retry-After": "7"},
			body:    `{"error":{"code":"saturated","message":"every matching pool is saturated","retry_after_seconds":3}}`,
			want:    &APIError{Status: 429, Code: "saturated", Message: "every matching pool is saturated", RetryAfter: 7 * time.Second},
			is:      []error{ErrSaturated},
			message: "every matching pool is saturated (retry after 7s)",
		},
		{
			name:   "Retry-After from the body when the header is missing",
			status: 503,
			body:   `{"error":{"code":"unavailable","message":"key region down","retry_after_seconds":3}}`,
			want:   &APIError{Status: 503, Code: "unavailable", Message: "key region down", RetryAfter: 3 * time.Second},
			is:     []error{ErrUnavailable},
		},
		{
			name:   "Retry-After as an HTTP date",
			status: 503,
			header: map[string]string{"Retry-After": date},
			body:   `{"error":{"code":"unavailable","message":"m"}}`,
			want:   &APIError{Status: 503, Code: "unavailable", Message: "m", RetryAfter: 90 * time.Second},
		},
		{
			name:   "unplaceable carries the explanation",
			status: 422,
			body:   `{"error":{"code":"unplaceable","message":"no pool","explanation":{"outcome":"UNPLACEABLE","candidates":[{"region":"r","pool":"p","rejected":"TAG_MISMATCH"}]}}}`,
			want: &APIError{Status: 422, Code: "unplaceable", Message: "no pool", Explanation: &apiv1.Explanation{
				Outcome: "UNPLACEABLE", Candidates: []apiv1.Candidate{{Region: "r", Pool: "p", Rejected: "TAG_MISMATCH"}},
			}},
			is: []error{ErrUnplaceable},
		},
		{
			name:    "a non-JSON body keeps the status",
			status:  502,
			body:    "<html><body>\n<h1>502 Bad Gateway</h1>\n</body></html>",
			want:    &APIError{Status: 502, Message: "HTTP 502 Bad Gateway: <html><body> <h1>502 Bad Gateway</h1> </body></html>"},
			isNot:   []error{ErrInternal, ErrUnavailable},
			message: "HTTP 502 Bad Gateway: <html><body> <h1>502 Bad Gateway</h1> </body></html>",
		},
		{
			name:    "an empty body",
			status:  404,
			want:    &APIError{Status: 404},
			is:      []error{ErrNotFound},
			message: "HTTP 404 Not Found",
		},
		{
			name:   "an unknown code matches by status",
			status: 401,
			body:   `{"error":{"code":"token_expired","message":"token expired"}}`,
			want:   &APIError{Status: 401, Code: "token_expired", Message: "token expired"},
			is:     []error{ErrUnauthorized},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			_, err := c.Get(ctxT(t), "t1")
			var got *APIError
			if !errors.As(err, &got) {
				t.Fatalf("got %T %v, want *APIError", err, err)
			}
			if tc.want.RetryAfter > 0 && (got.RetryAfter-tc.want.RetryAfter).Abs() <= time.Second {
				got.RetryAfter = tc.want.RetryAfter // an HTTP date has one-second resolution
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			for _, s := range tc.is {
				if !errors.Is(err, s) {
					t.Errorf("errors.Is(%v, %v) = false", err, s)
				}
			}
			for _, s := range tc.isNot {
				if errors.Is(err, s) {
					t.Errorf("errors.Is(%v, %v) = true", err, s)
				}
			}
			if tc.message != "" && err.Error() != tc.message {
				t.Errorf("message %q, want %q", err.Error(), tc.message)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message %q is not one line", err.Error())
			}
		})
	}
}

func TestContextCancelAbandonsTheRequest(t *testing.T) {
	arrived := make(chan struct{})
	_, c := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		close(arrived)
		<-r.Context().Done() // a long poll that never answers
	})
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.Events(ctx, "", "", time.Minute)
		done <- err
	}()
	<-arrived
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Events did not return after cancel")
	}
}

func TestContextDeadline(t *testing.T) {
	_, c := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Regions(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "http://h:8080", want: "http://h:8080"},
		{in: "127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "https://ax.example.com/api/", want: "https://ax.example.com/api"},
		{in: "", err: "empty"},
		{in: "ftp://h", err: "want http(s)"},
		{in: "http://", err: "want http(s)"},
	} {
		c, err := New(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("New(%q): got %v, want error containing %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("New(%q): %v", tc.in, err)
		case c.BaseURL() != tc.want:
			t.Errorf("New(%q).BaseURL() = %q, want %q", tc.in, c.BaseURL(), tc.want)
		}
	}
}

func TestPathPrefixIsKept(t *testing.T) {
	f, c := newFake(t, reply(200, `{"regions":[]}`))
	c2, err := New(f.srv.URL+"/ax/", WithHTTPClient(f.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	if _, err := c2.Regions(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := f.requests()[0]
	if r.Path != "/ax/v1/regions" || r.Auth != "" || r.UserAgent != DefaultUserAgent {
		t.Errorf("got %+v", r)
	}
}

func TestRefusedBeforeAnyRequest(t *testing.T) {
	f, c := newFake(t, reply(200, `{}`))
	ctx := ctxT(t)
	if _, err := c.BulkCancel(ctx, apiv1.BulkCancelRequest{}); err == nil {
		t.Error("BulkCancel with an empty filter: no error")
	}
	if _, err := c.BulkCancel(ctx, apiv1.BulkCancelRequest{Region: "eu-west"}); err == nil {
		t.Error("BulkCancel with a region and no filter: no error")
	}
	if _, err := c.SubmitBatch(ctx, make([]json.RawMessage, MaxBatch+1)); !errors.Is(err, ErrBatchTooLarge) {
		t.Errorf("SubmitBatch(%d): got %v", MaxBatch+1, err)
	}
	if _, err := c.SubmitDAG(ctx, json.RawMessage(`{nope`)); err == nil {
		t.Error("SubmitDAG with bad JSON: no error")
	}
	if _, err := c.Submit(ctx, nil); err == nil {
		t.Error("Submit(nil): no error")
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestValidateSpec(t *testing.T) {
	bad := 9
	for _, tc := range []struct {
		spec  task.Spec
		field string
	}{
		{spec: task.Spec{Type: "a"}},
		{spec: task.Spec{Type: ""}, field: "type"},
		{spec: task.Spec{Type: "a", Priority: &bad}, field: "priority"},
		{spec: task.Spec{Type: "a", Tags: map[string]string{"GPU": "x"}}, field: "tags.GPU"},
		{spec: task.Spec{Type: "a", Delay: task.Duration(-time.Second)}, field: "delay"},
		{spec: task.Spec{Type: "a", Payload: json.RawMessage(strings.Repeat("1", 2<<20))}}, // size is the server's to judge
	} {
		s := tc.spec
		before := s
		err := ValidateSpec(&s)
		var fe *task.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.spec.Type, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%+v: got %v, want a field error on %s", tc.spec, err, tc.field)
		}
		if s.Priority != before.Priority || s.MaxRetries != nil || s.Tenant != "" || s.Timeout != 0 {
			t.Errorf("ValidateSpec changed the spec: %+v", s)
		}
	}
}

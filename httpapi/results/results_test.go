package results

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/httpapi/endpoint"
	"github.com/ax-sched/ax/task"
)

func TestResultWaitsUntilTheTaskEnds(t *testing.T) {
	cases := []struct {
		name       string
		after      int // reads until the task is terminal (-1: never)
		end        task.Task
		query      string
		wantStatus int
		wantResult string
		wantError  string
	}{
		{"json result", 3, task.Task{State: task.Success, Result: `{"rows":3}`}, "wait=5s", 200, `{"rows":3}`, ""},
		{"text result", 0, task.Task{State: task.Success, Result: "plain"}, "", 200, `"plain"`, ""},
		{"failed", 2, task.Task{State: task.Failed, Reason: task.ReasonResultTooLarge, LastError: "too big"}, "wait=5s", 200, "", "too big"},
		{"not done", -1, task.Task{}, "wait=200ms", 202, "", ""},
		{"no wait", -1, task.Task{}, "", 202, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var reads atomic.Int32
			rs := New(Config{Task: func(_ context.Context, _ endpoint.Principal, id string, _ int) (*task.Task, error) {
				n := int(reads.Add(1)) - 1
				if c.after < 0 || n < c.after {
					return &task.Task{ID: id, State: task.Running, Progress: &task.Progress{Percent: 40, Attempt: 1}}, nil
				}
				end := c.end
				end.ID = id
				return &end, nil
			}})
			req := httptest.NewRequest(http.MethodGet, "/v1/tasks/t1/result?"+c.query, nil)
			req.SetPathValue("id", "t1")
			w := httptest.NewRecorder()
			start := time.Now()
			if err := rs.get(w, req, endpoint.Principal{Tenant: "acme"}); err != nil {
				t.Fatal(err)
			}
			var res apiv1.TaskResult
			if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			if w.Code != c.wantStatus || string(res.Result) != c.wantResult || res.Error != c.wantError || res.Done != (c.wantStatus == 200) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if c.name == "not done" && (time.Since(start) < 200*time.Millisecond || res.Progress == nil || res.Progress.Percent != 40) {
				t.Fatalf("answered after %v with %s, want the whole wait and the progress", time.Since(start), w.Body)
			}
		})
	}
}

func TestResultRefusesABadWait(t *testing.T) {
	for _, q := range []string{"wait=forever", "wait=-1s", "wait=2m"} {
		rs := New(Config{Task: func(context.Context, endpoint.Principal, string, int) (*task.Task, error) {
			t.Fatal("read a task for a bad request")
			return nil, nil
		}})
		req := httptest.NewRequest(http.MethodGet, "/v1/tasks/t1/result?"+q, nil)
		err := rs.get(httptest.NewRecorder(), req, endpoint.Principal{})
		if fe, ok := err.(*task.FieldError); !ok || fe.Field != "wait" {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// batchServer accepts every spec whose type is not "bad", answering 201 (or
// 200 for type "dup"), and replays the given statuses for whole calls
// first (0: answer normally).
func batchServer(t *testing.T, whole ...int) (*fake, *Client) {
	calls := 0
	return newFake(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
		calls++
		if calls <= len(whole) && whole[calls-1] != 0 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(whole[calls-1])
			_, _ = io.WriteString(w, `{"error":{"code":"saturated","message":"busy"}}`)
			return
		}
		var req apiv1.BatchRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("batch body: %v", err)
		}
		var resp apiv1.BatchResponse
		for i, raw := range req.Tasks {
			var s task.Spec
			_ = json.Unmarshal(raw, &s)
			switch s.Type {
			case "bad":
				resp.Rejected++
				resp.Results = append(resp.Results, apiv1.BatchItem{Status: 400, Error: &apiv1.Error{Code: "invalid_argument", Message: "bad", Field: "type"}})
			default:
				st := 201
				if s.Type == "dup" {
					st = 200
				}
				resp.Accepted++
				resp.Results = append(resp.Results, apiv1.BatchItem{Status: st, Task: &apiv1.SubmitResponse{ID: fmt.Sprintf("c%d-%d", calls, i), State: task.Ready}})
			}
		}
		_ = json.NewEncoder(w).Encode(resp)
	})
}

func specs(n int, typ func(i int) string) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = json.RawMessage(fmt.Sprintf(`{"type":%q}`, typ(i)))
	}
	return out
}

func TestSubmitAllChunks(t *testing.T) {
	f, c := batchServer(t)
	var progress []string
	in := specs(2500, func(i int) string {
		if i == 1500 {
			return "bad"
		}
		return "ok"
	})
	resp, err := c.SubmitAll(ctxT(t), in, func(done, total int) { progress = append(progress, fmt.Sprintf("%d/%d", done, total)) })
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	var sizes []int
	for _, r := range reqs {
		var br apiv1.BatchRequest
		_ = json.Unmarshal([]byte(r.Body), &br)
		sizes = append(sizes, len(br.Tasks))
		if r.Path != "/v1/tasks/batch" || r.Method != "POST" {
			t.Errorf("request %s %s", r.Method, r.Path)
		}
	}
	if fmt.Sprint(sizes) != "[1000 1000 500]" {
		t.Errorf("batch sizes %v", sizes)
	}
	if got := strings.Join(progress, " "); got != "1000/2500 2000/2500 2500/2500" {
		t.Errorf("progress %s", got)
	}
	if len(resp.Results) != 2500 || resp.Accepted != 2499 || resp.Rejected != 1 {
		t.Fatalf("results %d accepted %d rejected %d", len(resp.Results), resp.Accepted, resp.Rejected)
	}
	if r := resp.Results[1500]; r.Status != 400 || r.Error == nil || r.Error.Field != "type" {
		t.Errorf("result 1500: %+v", r)
	}
	if r := resp.Results[2000]; r.Task == nil || r.Task.ID != "c3-0" {
		t.Errorf("result 2000 is not the first of the third call: %+v", r)
	}
}

func TestSubmitAllWaitsOutSaturation(t *testing.T) {
	f, c := batchServer(t, 0, http.StatusTooManyRequests, http.StatusTooManyRequests)
	var slept []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	resp, err := c.SubmitAll(ctxT(t), specs(1500, func(int) string { return "ok" }), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.requests()) != 4 || len(resp.Results) != 1500 {
		t.Errorf("%d requests, %d results", len(f.requests()), len(resp.Results))
	}
	if fmt.Sprint(slept) != "[2s 2s]" {
		t.Errorf("slept %v, want the server's Retry-After twice", slept)
	}
}

func TestSubmitAllStopsAtAFailure(t *testing.T) {
	_, c := batchServer(t, 0, http.StatusBadRequest)
	resp, err := c.SubmitAll(ctxT(t), specs(2500, func(int) string { return "ok" }), nil)
	if !errors.Is(err, ErrSaturated) { // the fake's body says saturated; the code decides
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "tasks 1001–2000 of 2500") {
		t.Errorf("error %q does not say which tasks", err)
	}
	if len(resp.Results) != 1000 {
		t.Errorf("%d results kept, want the first batch's 1000", len(resp.Results))
	}
}

func TestSubmitAllGivesUpOnLongSaturation(t *testing.T) {
	f, c := batchServer(t, 429, 429, 429, 429, 429, 429)
	c.sleep = func(context.Context, time.Duration) error { return nil }
	_, err := c.SubmitAll(ctxT(t), specs(3, func(int) string { return "ok" }), nil)
	if !errors.Is(err, ErrSaturated) || len(f.requests()) != batchAttempts {
		t.Errorf("got %v after %d requests", err, len(f.requests()))
	}
}

func TestEncodeSpecs(t *testing.T) {
	raw, err := EncodeSpecs(&task.Spec{Type: "a"}, &task.Spec{Type: "b", Critical: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(raw[0]) != `{"type":"a"}` || string(raw[1]) != `{"type":"b","critical":true}` {
		t.Errorf("got %s", raw)
	}
}

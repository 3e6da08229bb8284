package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

func TestResultOverTheLimitFailsTheAttemptUncut(t *testing.T) {
	e := wt.New(t)
	w := e.Worker(worker.Options{Concurrency: 2, MaxResultBytes: 1000})
	w.Handle("big", func(_ context.Context, tk *worker.Task) error {
		tk.SetResult(strings.Repeat("x", 1001))
		return nil
	})
	w.Handle("fits", func(_ context.Context, tk *worker.Task) error {
		return tk.SetResultJSON(map[string]int{"rows": 3})
	})
	e.Run(w)
	big := e.SubmitOne("big", nil)
	tk := e.WaitState(big, task.Failed, 5*time.Second)
	if tk.Reason != task.ReasonResultTooLarge || tk.Result != "" || tk.Attempts != 1 ||
		!strings.Contains(tk.LastError, "1001 bytes, over this region's limit of 1000") {
		t.Fatalf("over the limit: reason %s, %d attempts, result %d bytes, error %q", tk.Reason, tk.Attempts, len(tk.Result), tk.LastError)
	}
	if st := e.Step(big, task.ReasonResultTooLarge); st == nil || st.To != task.Failed {
		t.Fatalf("trail step: %+v", st)
	}
	fits := e.SubmitOne("fits", nil, func(sp *task.Spec) { sp.ResultTTL = task.Duration(time.Hour) })
	tk = e.WaitState(fits, task.Success, 5*time.Second)
	if tk.Result != `{"rows":3}` || tk.ResultExpiresAt == nil || tk.FinishedAt == nil ||
		tk.ResultExpiresAt.Sub(*tk.FinishedAt) != time.Hour || time.Duration(tk.ResultTTL) != time.Hour {
		t.Fatalf("stored result %q ttl %v, expires %v after %v", tk.Result, tk.ResultTTL, tk.ResultExpiresAt, tk.FinishedAt)
	}
}

func TestProgressRidesTheHeartbeatAtMostOnceASecond(t *testing.T) {
	e := wt.New(t)
	w := e.Worker(worker.Options{Concurrency: 2})
	release := make(chan struct{})
	defer close(release)
	w.Handle("steps", func(ctx context.Context, tk *worker.Task) error {
		for i := 0; i <= 60; i++ {
			tk.SetProgress(i, "step")
		}
		tk.SetProgress(20, "lower") // within an attempt the percent never goes down
		<-release
		return nil
	})
	e.Run(w)
	id := e.SubmitOne("steps", nil)
	wt.Eventually(t, 5*time.Second, "progress on the task", func() bool {
		p := e.Get(id).Progress
		return p != nil && p.Message == "lower"
	})
	p := e.Get(id).Progress
	if p.Percent != 60 || p.Attempt != 1 || p.UpdatedAt.IsZero() {
		t.Fatalf("progress %+v, want 60 %% of attempt 1", p)
	}
}

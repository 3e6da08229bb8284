package handlers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

// Every command, reader and connection a handler starts must be gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNoopAndSleepThroughAWorker(t *testing.T) {
	e := wt.New(t)
	w := e.Worker(worker.Options{Concurrency: 2})
	w.Handle("noop", handlers.Noop)
	w.Handle("sleep", handlers.Sleep)
	e.Run(w)
	e.WaitState(e.SubmitOne("noop", map[string]any{"anything": true}), task.Success, 5*time.Second)
	tk := e.WaitState(e.SubmitOne("sleep", map[string]any{"ms": 30}), task.Success, 5*time.Second)
	if tk.Result != "slept 30ms" || tk.FinishedAt.Sub(*tk.StartedAt) < 30*time.Millisecond {
		t.Fatalf("sleep task %+v", tk)
	}
	tk = e.WaitState(e.SubmitOne("sleep", map[string]any{"ms": "soon"}), task.Failed, 5*time.Second)
	if tk.Reason != task.ReasonNonRetryable {
		t.Fatalf("bad sleep payload: %s %s", tk.Reason, tk.LastError)
	}
}

func TestSleepHonoursItsContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(worker.ErrCanceled) })
	start := time.Now()
	err := handlers.Sleep(ctx, &worker.Task{Type: "sleep", Payload: []byte(`{"ms": 60000}`)})
	if !errors.Is(err, worker.ErrCanceled) || time.Since(start) > time.Second {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
	for _, p := range []string{``, `{}`, `{"ms": -1}`, `[1]`} {
		if err := handlers.Sleep(context.Background(), &worker.Task{Type: "sleep", Payload: []byte(p)}); !errors.Is(err, worker.ErrNonRetryable) {
			t.Fatalf("payload %q: got %v, want a NonRetryable error", p, err)
		}
	}
}

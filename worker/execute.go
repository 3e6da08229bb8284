package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// execute runs one attempt and settles it.
func (w *Worker) execute(ctx context.Context, j *job) {
	defer w.tasks.Done()
	ctx, cancelDeadline := context.WithDeadlineCause(ctx, j.task.Deadline, ErrDeadline)
	start := time.Now()
	ctx, span := w.startRun(ctx, j)
	var err error
	returned := false
	// Deferred, so a handler that calls runtime.Goexit still frees its slot
	// and settles its task.
	defer func() {
		rt := time.Since(start)
		cause := context.Cause(ctx) // nil unless ctx ended before the handler returned
		cancelDeadline()
		j.cancel(nil)
		w.stats.running.Add(-1)
		if !returned {
			err = errors.New("worker: handler exited through runtime.Goexit")
		}
		// The slot frees once the outcome is recorded (a success: queued,
		// and the next claim waits for it, acker.settled), so the claim of
		// it never counts this task as running.
		w.settle(j, err, cause, rt)
		w.release(j.slots, j.milli)
		endRun(span, err, cause)
	}()
	err = runHandler(ctx, w.handler(j.task.Type), j.task)
	returned = true
}

// runHandler runs h, turning a panic into an error that carries the panic value
// and the top of the stack.
func runHandler(ctx context.Context, h Handler, t *Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v [%s]", r, stackHead(debug.Stack(), 3))
		}
	}()
	return h(ctx, t)
}

// runHandlerName ends the stack head: the frames below it are the worker's.
var runHandlerName = reflect.TypeFor[Task]().PkgPath() + ".runHandler"

// stackHead returns up to n frames between the panic and the worker, as
// "func (file:line)".
func stackHead(stack []byte, n int) string {
	lines := strings.Split(string(stack), "\n")
	var frames []string
	seenPanic := false
	for i := 1; i+1 < len(lines) && len(frames) < n; i += 2 {
		fn := strings.TrimSpace(lines[i])
		if !seenPanic {
			seenPanic = strings.HasPrefix(fn, "panic(")
			continue
		}
		if strings.HasPrefix(fn, runHandlerName+"(") {
			break
		}
		loc := strings.TrimSpace(lines[i+1])
		if k := strings.LastIndexByte(loc, ' '); k > 0 {
			loc = loc[:k] // drop the "+0x1d" offset
		}
		if k := strings.LastIndexByte(loc, '/'); k >= 0 {
			loc = loc[k+1:]
		}
		if k := strings.LastIndexByte(fn, '('); k > 0 {
			fn = fn[:k]
		}
		frames = append(frames, fn+" ("+loc+")")
	}
	return strings.Join(frames, " <- ")
}

// settle records the outcome of an attempt by the rules Handler states.
func (w *Worker) settle(j *job, err, cause error, runtime time.Duration) {
	w.mu.Lock()
	j.done, j.runtime = true, runtime
	stop, lost := j.stop, j.lost
	w.mu.Unlock()
	t := j.task
	var ra *RetryAfterError
	switch {
	case lost:
		w.drop(j, "lease lost while running")
	case err == nil:
		if why := w.resultTooLarge(t); why != "" {
			w.fail(j, queue.Failure{Retryable: false, Reason: task.ReasonResultTooLarge, Error: why})
			return
		}
		w.acks.add(j)
	case stop == "" && errors.Is(cause, ErrShutdown):
		w.giveBackAs(j, task.ReasonWorkerShutdown, 0)
	case stop == queue.StopPreempted:
		d := w.opts.PreemptDelayMin + rand.N(w.opts.PreemptDelayMax-w.opts.PreemptDelayMin+1)
		w.giveBackAs(j, task.ReasonPreempted, d)
	case stop == queue.StopCanceled:
		w.fail(j, queue.Failure{Error: "canceled while running: " + err.Error(), Retryable: true})
	case stop == queue.StopDeadline || errors.Is(cause, ErrDeadline):
		w.fail(j, queue.Failure{
			Error:     fmt.Sprintf("timeout: the attempt ran past its deadline (%s): %v", t.Deadline.Format(time.RFC3339Nano), err),
			Retryable: true, Reason: task.ReasonDeadline,
		})
	case errors.Is(err, ErrNonRetryable):
		w.fail(j, queue.Failure{Error: err.Error(), Retryable: false})
	case errors.As(err, &ra):
		w.retryAfter(j, ra.After, err)
	default:
		w.fail(j, queue.Failure{Error: err.Error(), Retryable: true})
	}
}

// resultTooLarge says why t's result cannot be recorded ("": it can): it
// is over the region's limit (Options.MaxResultBytes, or the remote
// Source's).
func (w *Worker) resultTooLarge(t *Task) string {
	size, limit := len(t.Result()), w.opts.MaxResultBytes
	if rs, ok := w.store.(resultSizer); ok {
		var l int
		if size, l = rs.ResultSize(t.Result()); l > 0 {
			limit = l
		}
	}
	if size <= limit {
		return ""
	}
	return fmt.Sprintf("the result is %d bytes, over this region's limit of %d bytes (results.max_bytes); it was not stored", size, limit)
}

// giveBack returns a task claimed during shutdown without running it.
func (w *Worker) giveBack(j *job) {
	defer w.tasks.Done()
	w.release(j.slots, j.milli)
	w.mu.Lock()
	j.done = true
	w.mu.Unlock()
	w.giveBackAs(j, task.ReasonWorkerShutdown, 0)
}

// giveBackAs is store.Return: the task leaves without spending a retry.
func (w *Worker) giveBackAs(j *job, reason string, delay time.Duration) {
	var st task.State
	ok := w.record(j, "return", func(ctx context.Context) (err error) {
		st, err = w.store.Return(ctx, j.id, j.token, reason, delay)
		return err
	})
	if !ok {
		return
	}
	w.log.Info("task given back", "task", j.id, "trace", j.task.TraceID, "reason", reason, "state", st, "delay", delay)
	if st == task.Canceled {
		w.stats.canceled.Add(1) // a cancel requested meanwhile wins
	} else {
		w.stats.returned.Add(1)
	}
	w.finish(j, st)
}

// retryAfter is store.RetryAfter: the task's key is paused for every
// worker and the task waits READY, no retry spent — unless the pause is
// past the task's pause budget: then the store failed the attempt
// (PENDING or FAILED, task.ReasonMaxPauseExceeded).
func (w *Worker) retryAfter(j *job, d time.Duration, err error) {
	var st task.State
	ok := w.record(j, "retry after", func(ctx context.Context) (err error) {
		st, err = w.store.RetryAfter(ctx, j.id, j.token, d)
		return err
	})
	if !ok {
		return
	}
	switch st {
	case task.Canceled:
		w.stats.canceled.Add(1)
	case task.Pending, task.Failed:
		w.log.Warn("task attempt failed: its retry after is past its pause budget", "task", j.id, "trace", j.task.TraceID,
			"after", d, "err", err, "state", st, "reason", task.ReasonMaxPauseExceeded)
		w.stats.failed.Add(1)
		if m := w.opts.Metrics; m != nil {
			m.failed(w.opts.Pool, st, task.ReasonMaxPauseExceeded)
		}
	default:
		w.log.Info("task paused its key", "task", j.id, "trace", j.task.TraceID, "after", d, "err", err, "state", st)
		w.stats.returned.Add(1)
	}
	w.finish(j, st)
}

// fail is store.Fail for one attempt.
func (w *Worker) fail(j *job, f queue.Failure) {
	f.ID, f.Token = j.id, j.token
	f.Error = clampText(f.Error, task.MaxErrorLen)
	var st task.State
	var due time.Time
	ok := w.record(j, "fail", func(ctx context.Context) (err error) {
		st, due, err = w.store.Fail(ctx, f)
		return err
	})
	if !ok {
		return
	}
	lvl := w.log.Info
	if st == task.Failed {
		lvl = w.log.Warn
	}
	attrs := []any{"task", j.id, "trace", j.task.TraceID, "type", j.task.Type, "attempt", j.task.Attempt, "state", st}
	if !due.IsZero() {
		attrs = append(attrs, "retry_at", due)
	}
	attrs = append(attrs, "retryable", f.Retryable)
	if f.Reason != "" {
		attrs = append(attrs, "reason", f.Reason)
	}
	lvl("task attempt failed", append(attrs, "err", f.Error)...)
	if st == task.Canceled {
		w.stats.canceled.Add(1)
	} else {
		w.stats.failed.Add(1)
	}
	if m := w.opts.Metrics; m != nil {
		m.failed(w.opts.Pool, st, f.Reason)
	}
	w.finish(j, st)
}

// record runs one store call for job j until it is recorded, retrying Redis
// errors with backoff. It gives up — false, after dropping the job — when
// the store says the lease is gone, when the heartbeat learnt so, or, once
// the worker is shutting down, when the lease has surely expired.
func (w *Worker) record(j *job, op string, f func(context.Context) error) bool {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := f(ctx)
		cancel()
		switch {
		case err == nil:
			return true
		case errors.Is(err, queue.ErrLeaseLost), errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrBadID):
			w.drop(j, err.Error())
			return false
		}
		if w.isLost(j) {
			w.drop(j, "lease lost while recording the outcome")
			return false
		}
		if w.stopping.Load() && time.Now().After(w.leaseEnd(j)) {
			w.drop(j, "gave up recording the outcome at shutdown: "+err.Error())
			return false
		}
		w.log.Warn("recording a task outcome failed; retrying", "op", op, "task", j.id, "err", err, "attempt", attempt)
		time.Sleep(backoff(attempt))
	}
}

func (w *Worker) isLost(j *job) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return j.lost
}

// leaseEnd is when j's lease ends at the latest, as far as this worker
// knows: a lease, from the claim or the last successful heartbeat, and
// never past the task's deadline.
func (w *Worker) leaseEnd(j *job) time.Time {
	from := j.claimedAt
	if beat := time.Unix(0, w.lastBeat.Load()); beat.After(from) {
		from = beat
	}
	end := from.Add(w.store.Options().Lease)
	if j.task.Deadline.Before(end) {
		end = j.task.Deadline
	}
	return end
}

// drop forgets a job whose outcome is not ours to record.
func (w *Worker) drop(j *job, why string) {
	w.log.Info("task dropped: lease lost", "task", j.id, "trace", j.task.TraceID, "why", why)
	w.stats.lost.Add(1)
	w.finish(j, "")
}

// finish forgets a settled job and reports it.
func (w *Worker) finish(j *job, st task.State) {
	w.mu.Lock()
	if cur := w.held[j.id]; cur == j {
		delete(w.held, j.id)
	}
	rt := j.runtime
	w.mu.Unlock()
	if m := w.opts.Metrics; m != nil {
		m.finish(w.opts.Pool, j.task, st, rt)
	}
	if w.opts.OnFinish != nil {
		w.opts.OnFinish(j.task, st, rt)
	}
}

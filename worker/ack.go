package worker

import (
	"context"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// acker records successes in batches: one store.Complete per ackBatch
// successes or per ackDelay, whichever comes first, or at once when a claim
// waits for them (settled). Its goroutine is owned by Run, which closes it
// after the last job settled.
type acker struct {
	w     *Worker
	mu    sync.Mutex
	queue []*job
	// added and done count the successes queued and those settled
	// (recorded or dropped), in queue order; urgent: a claim waits, flush
	// without the delay; settle is closed and replaced at each flush.
	added, done uint64
	urgent      bool
	settle      chan struct{}
	kick        chan struct{} // capacity 1: a batch started or filled up
	closing     chan struct{}
	once        sync.Once
}

func newAcker(w *Worker) *acker {
	return &acker{w: w, kick: make(chan struct{}, 1), closing: make(chan struct{}), settle: make(chan struct{})}
}

// add queues a success.
func (a *acker) add(j *job) {
	a.mu.Lock()
	a.queue = append(a.queue, j)
	a.added++
	n := len(a.queue)
	a.mu.Unlock()
	if n == 1 || n == ackBatch {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// settled returns once every success queued before the call is recorded
// (or dropped), flushing them without the batch delay, or when ctx ends.
// A claim waits for it: a slot freed by a success is claimed only once the
// store knows the task ended, so the claim counts what really runs — a
// fair share's floor (docs/fairness.md) sees its tenant's slot free.
func (a *acker) settled(ctx context.Context) {
	a.mu.Lock()
	want := a.added
	for a.done < want {
		a.urgent = true
		ch := a.settle
		a.mu.Unlock()
		select {
		case a.kick <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
		a.mu.Lock()
	}
	a.mu.Unlock()
}

func (a *acker) pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.queue)
}

// close makes run flush what is queued and return. Nothing may be added
// after it.
func (a *acker) close() { a.once.Do(func() { close(a.closing) }) }

func (a *acker) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-a.kick:
		case <-a.closing:
			for a.pending() > 0 {
				a.flush(ctx)
			}
			return
		}
		if a.pending() < ackBatch && !a.isUrgent() {
			timer.Reset(ackDelay)
			select {
			case <-timer.C:
			case <-a.kick: // filled up
				timer.Stop()
			case <-a.closing:
				timer.Stop()
			}
		}
		a.flush(ctx)
	}
}

// flush records every queued success (queue.MaxBatch per call), retrying
// Redis errors until recorded or the lease is known lost.
func (a *acker) flush(ctx context.Context) {
	w := a.w
	a.mu.Lock()
	batch := a.queue[:min(len(a.queue), queue.MaxBatch)]
	a.queue = append([]*job(nil), a.queue[len(batch):]...)
	a.urgent = a.urgent && len(a.queue) > 0
	a.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	defer a.flushed(len(batch))
	for attempt := 1; ; attempt++ {
		batch = a.live(batch)
		if len(batch) == 0 {
			return
		}
		cs := make([]queue.Completion, len(batch))
		w.mu.Lock()
		for i, j := range batch {
			// The progress no heartbeat carried yet goes with the success.
			cs[i] = queue.Completion{ID: j.id, Token: j.token, Result: j.task.Result(), Progress: j.progress}
		}
		w.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		errs, err := w.store.Complete(cctx, cs...)
		cancel()
		if err != nil {
			w.log.Warn("recording completions failed; retrying", "err", err, "tasks", len(batch), "attempt", attempt)
			time.Sleep(backoff(attempt))
			continue
		}
		for i, j := range batch {
			// After a failed send, "lease lost" may mean that the earlier
			// send was recorded and only its answer was lost.
			if errs[i] != nil && (attempt == 1 || !a.recorded(ctx, j)) {
				w.drop(j, errs[i].Error())
				continue
			}
			w.stats.succeeded.Add(1)
			w.finish(j, task.Success)
		}
		return
	}
}

func (a *acker) isUrgent() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.urgent
}

// flushed counts n successes settled and wakes the claims waiting.
func (a *acker) flushed(n int) {
	a.mu.Lock()
	a.done += uint64(n)
	close(a.settle)
	a.settle = make(chan struct{})
	more := a.urgent && len(a.queue) > 0
	a.mu.Unlock()
	if more {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// live filters out jobs whose completion can no longer be recorded: lease
// known lost, or — once shutting down — surely expired.
func (a *acker) live(batch []*job) []*job {
	w := a.w
	out := batch[:0]
	now := time.Now()
	for _, j := range batch {
		switch {
		case w.isLost(j):
			w.drop(j, "lease lost before the completion was recorded")
		case w.stopping.Load() && now.After(w.leaseEnd(j)):
			w.drop(j, "gave up recording the completion at shutdown: lease expired")
		default:
			out = append(out, j)
		}
	}
	return out
}

// recorded reports whether j's attempt is SUCCESS by this worker's hand.
func (a *acker) recorded(ctx context.Context, j *job) bool {
	get, ok := a.w.store.(lookup)
	if !ok {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	tk, err := get.Get(cctx, j.id)
	return err == nil && tk.State == task.Success && tk.Worker == a.w.opts.ID && tk.Attempts == j.task.Attempt
}

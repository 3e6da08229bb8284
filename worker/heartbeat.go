package worker

import (
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
)

// heartbeatLoop sends one heartbeat at once, then one every Heartbeat, until
// stop is closed. A heartbeat extends the lease of every task the worker
// holds (running, or finished and waiting for its acknowledgement) and
// records the worker, its slots and its types as alive, so the pool's
// capacity shows before any task arrives; its answer names the tasks to
// stop (stopJob). A failed one is retried sooner (backoff, at most one
// interval), so a short Redis hiccup costs no lease. A handler's progress
// brings the next one forward, to no sooner than progressEvery after the
// last.
func (w *Worker) heartbeatLoop(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	fails := 0
	var last time.Time
	next := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-w.progressKick:
			if soon := last.Add(progressEvery); soon.Before(next) {
				next = soon
				t.Reset(time.Until(soon))
			}
			continue
		case <-t.C:
		}
		last = time.Now()
		if err := w.beat(ctx); err != nil {
			fails++
			w.log.Warn("heartbeat failed; retrying", "err", err, "attempt", fails)
			next = time.Now().Add(min(backoff(fails), w.beatEvery()))
			t.Reset(time.Until(next))
			continue
		}
		fails = 0
		next = time.Now().Add(w.beatEvery())
		t.Reset(w.beatEvery())
	}
}

// beatEvery is the heartbeat interval: Options.Heartbeat, or the Source's
// own when shorter (0: it has none yet).
func (w *Worker) beatEvery() time.Duration {
	if p, ok := w.store.(beatPacer); ok {
		if d := p.HeartbeatInterval(); d > 0 && d < w.opts.Heartbeat {
			return d
		}
	}
	return w.opts.Heartbeat
}

// beat extends the lease of every held task in one call, with the
// progress their handlers reported since the last beat, registers the
// worker's slots and the task types it serves, and stops the handlers the
// store names.
func (w *Worker) beat(ctx context.Context) error {
	w.mu.Lock()
	held := make([]queue.Lease, 0, len(w.held))
	for _, j := range w.held {
		if !j.lost {
			held = append(held, queue.Lease{ID: j.id, Token: j.token, Progress: j.progress})
			j.progress = nil
		}
	}
	w.mu.Unlock()
	sent := time.Now()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	stops, err := w.store.Heartbeat(cctx, w.opts.ID, w.opts.Pool, w.opts.Concurrency, w.Types(), held)
	cancel()
	if err != nil {
		w.keepProgress(held)
		return err
	}
	w.lastBeat.Store(sent.UnixNano())
	for _, s := range stops {
		w.stopJob(s)
	}
	return nil
}

// stopJob applies one stop from the heartbeat. The first stop of a job
// decides its outcome; a lost lease always wins.
func (w *Worker) stopJob(s queue.Stop) {
	w.mu.Lock()
	j := w.held[s.ID]
	if j == nil || j.token != s.Token {
		w.mu.Unlock()
		return
	}
	if s.Why == queue.StopLost {
		j.lost = true
	}
	first := j.stop == ""
	if first {
		j.stop = s.Why
	}
	done := j.done
	w.mu.Unlock()
	if done || !first {
		return
	}
	w.log.Info("stopping handler", "task", j.id, "trace", j.task.TraceID, "why", s.Why)
	j.cancel(stopCause(s.Why))
}

func stopCause(why queue.StopReason) error {
	switch why {
	case queue.StopCanceled:
		return ErrCanceled
	case queue.StopPreempted:
		return ErrPreempted
	case queue.StopDeadline:
		return ErrDeadline
	default:
		return ErrLeaseLost
	}
}

// keepProgress puts back the progress of a heartbeat that failed, unless a
// newer one came meanwhile.
func (w *Worker) keepProgress(held []queue.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range held {
		if j := w.held[l.ID]; l.Progress != nil && j != nil && j.token == l.Token && j.progress == nil {
			j.progress = l.Progress
		}
	}
}

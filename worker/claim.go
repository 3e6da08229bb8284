package worker

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// claimLoop fills g's free slots with tasks of its types until ctx ends. Handlers run under base, which
// the end of ctx does not cancel: the shutdown stops them itself, after the
// grace (stopHandlers).
//
// A worker's slots are counted in milli-slots: a task holds its spec's
// slots (task.Spec.Slots, a whole slot when left out) while it runs.
// Whenever room is free it claims up to ClaimBatch tasks that fit the free
// room together in one call; a claim that meets a task the room cannot fit
// stops there (the task keeps its place) and the next claim waits for a
// running task to end. A claim that came back short found the queue empty: the loop
// then blocks on the pool's wake-up markers (waitForWork) instead of
// polling, so a submit brings it back within milliseconds and IdleWait
// bounds the cost of a lost marker. A claim that came back full means work
// may remain, so the next free slot claims again at once. A slot frees once
// its task's outcome is recorded; in a pool with a fair share (the last
// claim's queue.Claimed.Counts) a claim first flushes the successes queued
// for acknowledgement, so the store never counts a task that ended as
// running when it decides whose the slot is. A wake-up passed on for
// another worker's types can come back to this one while that worker is
// busy: from the second such wake-up in a row the loop waits (wastedWait)
// before it listens again.
func (w *Worker) claimLoop(ctx, base context.Context, g *slots) {
	// mayRemain: the last claim came back full, so more work may be queued
	// and the next free slot claims at once; otherwise wait for a wake-up.
	mayRemain := true
	fails := 0
	// wasted counts wake-ups in a row whose claim took nothing. A claim
	// takes only the types this worker serves and leaves a wake-up for the
	// tasks it passed over (claim.lua), which are another worker's: while
	// that worker is busy, this one would take its own wake-up back at once
	// and spin. From the second in a row it waits, from 20ms doubling up to
	// IdleWait, before it listens again; its own types wait as long at most.
	wasted := 0
	// parked: how soon tasks a limit set aside may be released (the last
	// claim's answer); sooner than the idle wait, the worker claims again
	// then instead of waiting for a wake-up, which a release sends no one.
	var parked time.Duration
	// full: the last claim met a task its room could not fit, so the next
	// one waits for a task of g to end (and free room) first.
	full := false
	for ctx.Err() == nil {
		woken := false
		if full {
			// the wait is in reserve
		} else if !mayRemain && parked > 0 {
			if !sleep(ctx, parked) {
				return
			}
		} else if !mayRemain {
			if wasted > 1 && !sleep(ctx, wastedWait(wasted-1, w.opts.IdleWait)) {
				return
			}
			var ok bool
			if woken, ok = w.waitForWork(ctx, g, &fails); !ok {
				return
			}
		}
		room := w.reserve(ctx, g, full)
		if room == 0 {
			return
		}
		n := w.opts.ClaimBatch
		// In a pool with a fair share the successes that freed these slots
		// are recorded first, so the claim does not count them as running
		// (a floor's freed slot would go to another tenant). Elsewhere the
		// acks go on alongside the claims.
		if g.counts {
			w.acks.settled(ctx)
		}
		sent := time.Now()
		// Not ctx: a shutdown must not drop the answer of a claim Redis ran,
		// or those tasks would sit RUNNING until their leases expire.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		claimed, err := w.store.ClaimTasks(cctx, queue.ClaimRequest{
			Pool: w.opts.Pool, Worker: w.opts.ID, N: n, Price: w.opts.PricePerSlotHour, Types: w.claimTypes(g), Room: room,
		})
		cancel()
		if err == nil {
			g.counts = claimed.Counts
		}
		tasks := claimed.Tasks
		parked = 0
		if claimed.Parked < w.opts.IdleWait {
			parked = claimed.Parked
		}
		for _, t := range tasks {
			room -= t.SlotMilli()
		}
		w.unreserve(g, room)
		full = claimed.Full && err == nil
		switch {
		case len(tasks) > 0 || !woken:
			wasted = 0
		default:
			wasted++
		}
		// A claim can fail after some shards answered: run what came back.
		for _, qt := range tasks {
			w.start(base, g, qt, sent, ctx.Err() != nil)
		}
		if err != nil {
			fails++
			w.log.Warn("claim failed; backing off", "err", err, "attempt", fails)
			if !sleep(ctx, backoff(fails)) {
				return
			}
			mayRemain = true
			continue
		}
		fails = 0
		mayRemain = len(tasks) == n || full
	}
}

// waitForWork blocks until the pool's wake-up marker (woken), the safety
// timeout (IdleWait), or ctx. ok is false when ctx ended. Redis does not
// abandon a blocking pop when ctx ends, so an idle worker's shutdown can
// take up to IdleWait.
func (w *Worker) waitForWork(ctx context.Context, g *slots, fails *int) (woken, ok bool) {
	woken, err := g.waker.Wait(ctx, w.opts.IdleWait)
	if ctx.Err() != nil {
		return false, false
	}
	if err == nil {
		*fails = 0
		return woken, true
	}
	*fails++
	w.log.Warn("waiting for work failed; backing off", "err", err, "attempt", *fails)
	// Then claim: its answer tells whether Redis is back.
	return false, sleep(ctx, backoff(*fails))
}

// wastedWait is the pause after the k-th (from 1) wasted wake-up beyond
// the first: 20ms doubling, capped at most, with jitter over its upper half.
func wastedWait(k int, most time.Duration) time.Duration {
	d := min(20*time.Millisecond<<min(k-1, 10), most)
	return d/2 + rand.N(d/2+1)
}

// start runs one claimed task in its own goroutine. A task claimed while
// the worker is shutting down is given back unstarted.
func (w *Worker) start(base context.Context, g *slots, qt *task.Task, sent time.Time, giveBack bool) {
	deadline := sent.Add(time.Duration(qt.Timeout))
	t := newTask(qt, deadline)
	t.progress = w.progressFunc(qt.ID, qt.LeaseToken)
	// The deadline counts from before the claim was sent, so the worker's
	// timeout fires no later than the store's (which counts from the
	// claim's Redis time) and its own DEADLINE_EXCEEDED is what is recorded.
	// base never ends, so a job's context costs no registration with a
	// shared parent: thousands of tasks a second would contend on its lock.
	ctx, cancel := context.WithCancelCause(base)
	j := &job{task: t, id: qt.ID, token: qt.LeaseToken, slots: g, milli: qt.SlotMilli(), claimedAt: sent, cancel: cancel}
	w.mu.Lock()
	w.held[j.id] = j
	halted := w.halted
	w.mu.Unlock()
	if halted && !giveBack {
		cancel(ErrShutdown) // the grace is over: it runs stopped, and is given back
	}
	w.stats.claimed.Add(1)
	if m := w.opts.Metrics; m != nil {
		m.claimed(w.opts.Pool, qt, !giveBack)
	}
	w.tasks.Add(1)
	if giveBack {
		cancel(ErrShutdown)
		go w.giveBack(j)
		return
	}
	w.stats.running.Add(1)
	go w.execute(ctx, j)
}

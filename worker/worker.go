package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/claim"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/trace"
)

// Worker serves one pool (Handler says what a handler's return does, Run
// how it stops). Create it with
// New, register handlers with Handle, then call Run once.
type Worker struct {
	store  Source
	opts   Options
	log    *slog.Logger
	tracer trace.Tracer // an "ax.run" span per attempt (tracing.go)
	// groups are the worker's concurrency pools, the shared one first
	// (slots.go); each claim loop's idle wait (its waker) is set by Run
	// before the loop starts and closed when it ends (on a Redis Cluster
	// it holds one blocking pop per shard).
	groups []*slots

	hmu      sync.RWMutex
	handlers map[string]Handler
	any      Handler     // HandleAny's catch-all; nil: none
	served   queue.Types // what claims take and heartbeats publish: the registered types, or AnyType

	started  atomic.Bool
	stopping atomic.Bool  // Run's context has ended
	lastBeat atomic.Int64 // unix ns at which the last successful heartbeat was sent
	// progressKick wakes the heartbeat loop for a handler's progress.
	progressKick chan struct{}

	mu     sync.Mutex
	held   map[string]*job // claimed and not yet settled, by task id
	halted bool            // the shutdown grace is over: handlers are stopped

	tasks sync.WaitGroup // one per job goroutine
	acks  *acker
	stats counters
}

// job is one claimed attempt.
type job struct {
	task      *Task
	id, token string
	slots     *slots    // the concurrency pool whose room it holds
	milli     int       // the room it holds (its SlotMilli)
	claimedAt time.Time // local time just before the claim was sent
	cancel    context.CancelCauseFunc

	// Under Worker.mu.
	stop    queue.StopReason // first stop the heartbeat reported
	lost    bool             // lease known lost: nothing is recorded
	done    bool             // the handler returned
	runtime time.Duration    // handler run time, once done
	// progress is the newest the handler reported and no heartbeat has
	// carried yet (nil: none).
	progress   *task.Progress
	progressHi float64 // the highest percent reported
}

// New returns a worker for opts.Pool claiming through store: a region's
// store (its Claimer stage) or the API (Remote).
func New(store Source, opts Options) (*Worker, error) {
	if c, direct := store.(*claim.Claimer); store == nil || direct && c == nil {
		return nil, errors.New("worker: store is nil")
	}
	lease := store.Options().Lease
	if cb, ok := store.(claimBatcher); ok && opts.ClaimBatch == 0 {
		opts.ClaimBatch = cb.ClaimBatch()
	}
	if err := opts.withDefaults(lease); err != nil {
		return nil, err
	}
	if _, ok := store.(waking); !ok && len(opts.TypeConcurrency) > 0 {
		// Its claims take every type the worker registered: a type's own
		// slots could not keep to their type.
		return nil, errors.New("worker: Options.TypeConcurrency needs a direct store; a remote worker's claims cannot name types")
	}
	w := &Worker{
		store:    store,
		opts:     opts,
		log:      opts.Logger.With("component", "worker", "pool", opts.Pool, "worker", opts.ID),
		tracer:   tracing.Tracer(opts.TracerProvider),
		handlers: map[string]Handler{},
		served:   mustServe(),
		held:     map[string]*job{},
		groups:   newSlots(opts),

		progressKick: make(chan struct{}, 1),
	}
	w.acks = newAcker(w)
	if opts.Metrics != nil {
		opts.Metrics.pool(opts.Pool)
	}
	return w, nil
}

// Options returns the worker's effective options.
func (w *Worker) Options() Options { return w.opts }

// Handle registers h for tasks of type typ, before or while Run runs. The
// worker claims only the types it has handlers for, and publishes them with
// its heartbeat so that placement sends a type only to pools whose workers
// serve it; tasks of other types stay READY, in order, for the pool's other
// workers. It panics on a nil handler, a type that is not a task type name
// (task.CheckType), a type registered twice, or more than
// queue.MaxWorkerTypes types, like http.Handle: all are programming errors
// (a worker that serves more types takes them all with HandleAny).
func (w *Worker) Handle(typ string, h Handler) {
	if h == nil {
		panic("worker: Handle needs a handler")
	}
	if err := task.CheckType(typ); err != nil {
		panic(fmt.Sprintf("worker: Handle(%q): %v", typ, err))
	}
	w.hmu.Lock()
	defer w.hmu.Unlock()
	if _, dup := w.handlers[typ]; dup {
		panic(fmt.Sprintf("worker: a handler for task type %q is already registered", typ))
	}
	if w.any == nil {
		served, err := queue.ServeTypes(append(w.typesLocked(), typ)...)
		if err != nil {
			panic(fmt.Sprintf("worker: Handle(%q): %v", typ, err))
		}
		w.served = served
	}
	w.handlers[typ] = h
}

// HandleAny registers h for every task type without a handler of its own
// (a catch-all: a router, a proxy to another service). The worker then
// claims tasks of any type and publishes that it serves every type. It
// panics on a nil handler or a second call.
func (w *Worker) HandleAny(h Handler) {
	if h == nil {
		panic("worker: HandleAny needs a handler")
	}
	w.hmu.Lock()
	defer w.hmu.Unlock()
	if w.any != nil {
		panic("worker: HandleAny called twice")
	}
	w.any, w.served = h, queue.AnyType
}

// Types returns what the worker serves: the types it has handlers for, or
// queue.AnyType after HandleAny.
func (w *Worker) Types() queue.Types {
	w.hmu.RLock()
	defer w.hmu.RUnlock()
	return w.served
}

// mustServe is the empty set: a worker with no handler claims nothing.
func mustServe() queue.Types {
	t, err := queue.ServeTypes()
	if err != nil {
		panic(err)
	}
	return t
}

// handler returns the handler for typ, else the catch-all, else one that
// fails the task as NonRetryable naming what this worker does handle (a
// claim takes only served types, so only a store used without
// ClaimRequest.Types gets there).
func (w *Worker) handler(typ string) Handler {
	w.hmu.RLock()
	h := w.handlers[typ]
	if h == nil {
		h = w.any
	}
	w.hmu.RUnlock()
	if h != nil {
		return h
	}
	return func(context.Context, *Task) error {
		return NonRetryable(fmt.Errorf("worker: no handler for task type %q in pool %q (worker %s handles: %s)",
			typ, w.opts.Pool, w.opts.ID, strings.Join(w.types(), ", ")))
	}
}

func (w *Worker) types() []string {
	w.hmu.RLock()
	defer w.hmu.RUnlock()
	return w.typesLocked()
}

// typesLocked lists the registered types, sorted; w.hmu is held.
func (w *Worker) typesLocked() []string {
	ts := make([]string, 0, len(w.handlers)+1)
	for t := range w.handlers {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// Run serves the pool until ctx ends, then shuts down gracefully and
// returns nil once every goroutine it started has exited. It may be called
// once.
//
// Shutdown order:
//  1. claiming stops (tasks of a claim already sent are given back
//     unstarted); meanwhile
//  2. running handlers get ShutdownGrace to finish, recorded as usual;
//  3. then the remaining ones are cancelled (cause ErrShutdown), and each
//     task is given back as its handler returns;
//  4. once every handler returned, queued completions are flushed;
//  5. then heartbeats stop: until here they kept every held lease alive.
//
// Errors of the Source never stop it: every call is retried with capped,
// jittered backoff.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called more than once")
	}
	w.log.Info("worker starting", "slots", w.opts.Concurrency, "handles", w.Types().String(), "type_slots", w.opts.TypeConcurrency)
	// Acks, heartbeats and handlers must outlive ctx: they drain the shutdown.
	base := context.WithoutCancel(ctx)

	sess, _ := w.store.(Session)
	if sess != nil {
		if err := sess.Open(base, w.opts.ID, w.opts.Pool, w.opts.Concurrency, w.Types()); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
	}
	beatStop, beatDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(beatDone); w.heartbeatLoop(base, beatStop) }()
	ackDone := make(chan struct{})
	go func() { defer close(ackDone); w.acks.run(base) }()
	claimDone := make(chan struct{})
	var claimers sync.WaitGroup
	for _, g := range w.groups {
		if g.size == 0 {
			continue
		}
		g.waker = w.newWaiter()
		claimers.Add(1)
		go func() { defer claimers.Done(); defer g.waker.Close(); w.claimLoop(ctx, base, g) }()
	}
	go func() { claimers.Wait(); close(claimDone) }()

	<-ctx.Done()
	w.stopping.Store(true)
	w.log.Info("worker shutting down", "running", w.Stats().Running, "grace", w.opts.ShutdownGrace)

	// The claimer may sit in the idle wait (Redis does not abandon a
	// blocking pop when ctx ends) for up to IdleWait; the grace runs
	// meanwhile. No job starts after claimDone, so tasks.Wait is safe then.
	idle := make(chan struct{})
	go func() { <-claimDone; w.tasks.Wait(); close(idle) }()
	grace := time.NewTimer(w.opts.ShutdownGrace)
	select {
	case <-idle:
		grace.Stop()
	case <-grace.C:
		w.log.Warn("shutdown grace over: stopping handlers and giving their tasks back", "running", w.Stats().Running)
		w.stopHandlers(ErrShutdown)
		w.waitStuck(idle)
	}

	w.acks.close()
	<-ackDone
	close(beatStop)
	<-beatDone
	if sess != nil {
		cctx, cancel := context.WithTimeout(base, callTimeout)
		if err := sess.Close(cctx); err != nil {
			w.log.Warn("leaving failed; the tasks still leased go back when their leases end", "err", err)
		}
		cancel()
	}
	s := w.Stats()
	w.log.Info("worker stopped", "claimed", s.Claimed, "succeeded", s.Succeeded, "failed", s.Failed,
		"canceled", s.Canceled, "returned", s.Returned, "lost", s.Lost, "unsettled", s.InFlight)
	return nil
}

// newWaiter is a claim loop's idle wait: the store's wake-ups, or none
// for a Source that waits within its claims.
func (w *Worker) newWaiter() waiter {
	if s, ok := w.store.(waking); ok {
		return s.NewWaker(w.opts.Pool)
	}
	return longPoll{}
}

// stopHandlers cancels every running handler with cause; a job that starts
// afterwards is cancelled as it starts.
func (w *Worker) stopHandlers(cause error) {
	w.mu.Lock()
	w.halted = true
	var stop []context.CancelCauseFunc
	for _, j := range w.held {
		if !j.done {
			stop = append(stop, j.cancel)
		}
	}
	w.mu.Unlock()
	for _, cancel := range stop {
		cancel(cause)
	}
}

// waitStuck waits for idle, naming every 10s the tasks whose handlers ignore
// their cancelled context.
func (w *Worker) waitStuck(idle <-chan struct{}) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-idle:
			return
		case <-t.C:
			w.mu.Lock()
			var ids []string
			for id, j := range w.held {
				if !j.done {
					ids = append(ids, id)
				}
			}
			w.mu.Unlock()
			w.log.Error("handlers ignore their cancelled context; Run cannot return", "tasks", ids)
		}
	}
}

// backoff is the wait before retry number attempt (from 1) of a failed
// Redis call: exponential from 50ms, capped at 2s, with jitter over its
// upper half so a fleet of workers does not retry in step.
func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(max(attempt-1, 0), 6)
	d = min(d, 2*time.Second)
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

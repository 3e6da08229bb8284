// Package worker is the Go worker runtime: it serves one pool of one region,
// claiming tasks from that region's store (its claim.Claimer stage), running the handler
// registered for each task's type, keeping the leases alive and recording
// every outcome. `ax worker` is built on it, and so is any program that runs
// its own handlers.
//
//	w, err := worker.New(store.Claimer(), worker.Options{Pool: "cpu", Concurrency: 16})
//	w.Handle("report.generate", func(ctx context.Context, t *worker.Task) error {
//		t.SetResult("s3://reports/" + t.ID)
//		return nil
//	})
//	err = w.Run(ctx) // until ctx is cancelled, then a graceful shutdown
//
// # Slots, claims and wake-ups
//
// A worker has Concurrency slots, counted in milli-slots: a task holds its
// spec's slots (task.Spec.Slots, a whole slot when left out) while it runs.
// Whenever room is free it claims up to ClaimBatch tasks that fit the free
// room together in one store.Claim; a claim that meets a task the room
// cannot fit stops there (the task keeps its place) and the next claim
// waits for a running task to end. When a claim comes
// back short the queue is empty, and the worker blocks on the pool's wake-up
// markers (a claim.Waker: one BLPOP over every shard on one Redis, one
// blocking pop per shard on a Redis Cluster) instead of polling: a submit
// brings it back within milliseconds; the wait's safety timeout (IdleWait,
// 1s) bounds the cost of a lost marker. A claim that came back full means work may remain,
// so the next free slot claims again at once. A slot frees once its task's
// outcome is recorded, and in a pool with a fair share (the last claim's
// queue.Claimed.Counts) a claim first flushes the successes queued for
// acknowledgement: the store never counts a task that ended as running
// when it decides whose the slot is (a tenant below its floor first).
// Elsewhere successes are recorded alongside claims.
//
// # Task types
//
// A worker claims only the task types it has handlers for (Handle; at most
// queue.MaxWorkerTypes), or every type once HandleAny registered a
// catch-all. Tasks of other types stay READY, in order, for the pool's
// other workers. The heartbeat publishes the types, and the region leader
// publishes per pool what its live workers serve, so placement sends a
// type only to pools that serve it (NO_HANDLER in explanations). A wake-up
// a claim passed on for another worker's types can come back to this one
// while that worker is busy: from the second such wake-up in a row the
// worker waits (20ms doubling up to IdleWait) before it listens again.
//
// # A concurrency pool per type
//
// Options.TypeConcurrency gives task types slots of their own, taken out of
// Concurrency (`ax worker --type-concurrency http=4`, YAML worker.types):
// each listed type, and the shared rest of the slots, has its own claim
// loop and wake-up wait and claims only its types, so handlers of one type
// that all block (an upstream that hangs) hold only that type's slots while
// the other types keep running. The heartbeat still publishes Concurrency
// slots and every served type. With HandleAny the shared slots claim every
// type (the store's filter lists types to take), those with slots of their
// own included.
//
// # Leases
//
// One store.Heartbeat call every Heartbeat (3s) extends the leases of every
// task the worker holds (running, or finished and waiting for its ack) and
// records the worker and its slots as alive; the first one goes out when Run
// starts, so the pool's capacity shows before any task arrives. Heartbeat
// answers name the tasks to stop; their handlers' contexts are cancelled
// with a cause (context.Cause): ErrLeaseLost, ErrCanceled, ErrPreempted or
// ErrDeadline. Each handler context also carries the task's deadline (its
// timeout from claim), with cause ErrDeadline.
//
// # Outcomes
//
// When a handler returns, the task is settled by the first rule that holds:
//
//   - lease lost: nothing is recorded; someone else owns the task now.
//   - the handler returned nil: SUCCESS with the text given to SetResult.
//     A handler that finished its work is believed even if a stop arrived
//     meanwhile. Successes are acknowledged in batches (up to 32, or after
//     2ms, or at once when a claim waits for them), so a busy worker
//     spends one round trip on many of them.
//   - stopped by the worker's shutdown: given back (READY, no retry spent).
//   - preempted: given back with a jittered 60–120s delay (no retry spent).
//   - cancel requested: acknowledged as a failed attempt, which the store
//     turns into CANCELED.
//   - deadline passed: failed with reason DEADLINE_EXCEEDED (retryable).
//   - the error is NonRetryable (errors.Is(err, ErrNonRetryable)):
//     FAILED, NON_RETRYABLE.
//   - the error is a RetryAfter(d, err) (errors.As finds a
//     *RetryAfterError): the tenant's tasks of the task's limit key, or
//     its type, are paused until now + d for every worker of the region,
//     and the task waits
//     READY (RETRY_AFTER in its trail) without spending a retry.
//   - any other error, or a panic (its value and the top of its stack become
//     the error text): failed with retry and backoff while retries are left.
//
// Result text is bounded to task.MaxResultLen bytes, error text to
// task.MaxErrorLen. Redis errors never stop the worker: every call is
// retried with capped, jittered backoff; an acknowledgement is retried until
// it is recorded or the lease is known to be lost.
//
// # Shutdown
//
// Run's context ending starts the shutdown, in this order: claiming stops;
// running handlers get ShutdownGrace to finish (their outcomes are recorded
// as usual); then the rest are cancelled with cause ErrShutdown and their
// tasks given back without spending a retry; queued acknowledgements are
// flushed; heartbeats, which kept the leases alive until here, stop. Run
// returns once every goroutine it started has exited — so a handler must
// return when its context is done.
//
// Built-in handlers (noop, sleep, exec with an allowlist, http with a URL
// allowlist) live in package worker/handlers.
package worker

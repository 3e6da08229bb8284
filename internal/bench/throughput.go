package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// ThroughputOptions size a throughput run. Zero values take the defaults.
type ThroughputOptions struct {
	N           int // tasks drained in each of the two drain phases (default 200 000)
	Single      int // of the first N, tasks submitted one per call (default 20 000)
	SingleConns int // goroutines submitting one task per call (default 16)
	Batch       int // tasks per batched submit (default 1 000)
	Submitters  int // goroutines submitting batches (default 2)
	WorkerOptions
	// API, when set, is an ax server: API-level submit rates are measured
	// too (APITasks tasks of type noop, one per request and in batches).
	API      string
	APIToken string
	APITasks int // default 10 000
}

func (o *ThroughputOptions) defaults() {
	if o.N <= 0 {
		o.N = 200000
	}
	if o.Single < 0 {
		o.Single = 0
	} else if o.Single == 0 {
		o.Single = min(20000, o.N/10)
	}
	o.Single = min(o.Single, o.N)
	if o.SingleConns <= 0 {
		o.SingleConns = 16
	}
	if o.Batch <= 0 {
		o.Batch = queue.MaxBatch
	}
	if o.Submitters <= 0 {
		o.Submitters = 2
	}
	o.WorkerOptions.defaults()
	if o.APITasks <= 0 {
		o.APITasks = 10000
	}
}

const NoopType = "bench.noop"

// Throughput measures submit rates and how fast workers drain no-op tasks:
//
//  1. submit-single: Single tasks, one per call, from SingleConns goroutines;
//  2. submit-batch: the rest of N in calls of Batch from Submitters goroutines;
//  3. drain: the workers start and run all N (claim, no-op, ack);
//  4. submit+drain: N more tasks submitted while the workers drain them.
func Throughput(ctx context.Context, e *Env, o ThroughputOptions, progress Progress) (*Summary, error) {
	o.defaults()
	s := NewSummary("throughput")
	s.Redis = e.RedisDescription(ctx)
	s.Params = map[string]any{"n": o.N, "single": o.Single, "single_conns": o.SingleConns, "batch": o.Batch,
		"submitters": o.Submitters, "workers": o.Workers, "concurrency": o.Concurrency, "claim_batch": o.ClaimBatch,
		"payload_bytes": len(Payload64)}
	sp, err := Spec(NoopType, Payload64)
	if err != nil {
		return nil, err
	}
	mk := func(int) queue.NewTask { return queue.NewTask{Spec: sp, Pool: e.Target.Pool, Pinned: true} }

	// 1. One task per call.
	var sent atomic.Int64
	m := e.StartMeter(ctx)
	if err := e.SubmitBatches(ctx, o.Single, 1, o.SingleConns, mk, func(k int) { sent.Add(int64(k)) }); err != nil {
		return nil, err
	}
	single := s.AddPhase("submit-single", int64(o.Single), m.Stop(ctx))

	// 2. Batches.
	rest := o.N - o.Single
	stopBar := Ticker(ctx, func() { progress.Report("submit", int(sent.Load()), o.N) })
	m = e.StartMeter(ctx)
	if err := e.SubmitBatches(ctx, rest, o.Batch, o.Submitters, mk, func(k int) { sent.Add(int64(k)) }); err != nil {
		stopBar()
		return nil, err
	}
	batch := s.AddPhase("submit-batch", int64(rest), m.Stop(ctx))
	stopBar()
	progress.Report("submit", o.N, o.N)

	// 3. Drain what is queued.
	noop := func(context.Context, *worker.Task) error { return nil }
	m = e.StartMeter(ctx)
	f, err := e.startFleet(o.WorkerOptions, map[string]worker.Handler{NoopType: noop}, nil)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	if err := Await(ctx, "drain", o.N, f.succeeded.Load, progress); err != nil {
		return nil, err
	}
	drain := s.AddPhase("drain", int64(o.N), m.Stop(ctx))

	// 4. Submit while draining.
	m = e.StartMeter(ctx)
	subErr := make(chan error, 1)
	go func() { subErr <- e.SubmitBatches(ctx, o.N, o.Batch, o.Submitters, mk, nil) }()
	if err := Await(ctx, "submit+drain", 2*o.N, f.succeeded.Load, progress); err != nil {
		return nil, err
	}
	if err := <-subErr; err != nil {
		return nil, err
	}
	both := s.AddPhase("submit+drain", int64(o.N), m.Stop(ctx))
	f.stop()

	s.Add("end_to_end_drain", drain.PerS, "tasks/s", "higher", "≥ 35000")
	s.Add("end_to_end_submit_and_drain", both.PerS, "tasks/s", "higher", "≥ 35000")
	s.Add("submit_batch", batch.PerS, "tasks/s", "higher", "≥ 100000")
	s.Add("submit_single", single.PerS, "tasks/s", "higher", "")
	s.Add("drain_redis_cpu_per_task", drain.RedisUsPer, "µs", "lower", "")
	s.Add("drain_ax_cpu_per_task", drain.AxUsPer, "µs", "lower", "")
	s.Add("submit_batch_redis_cpu_per_task", batch.RedisUsPer, "µs", "lower", "")

	c, err := e.Store.Tasks().Counts(ctx)
	if err != nil {
		return nil, err
	}
	s.Counts["submitted"] = int64(2 * o.N)
	s.Counts["claimed"] = f.claimed()
	s.Counts["succeeded"] = f.succeeded.Load()
	s.Counts["not_succeeded"] = f.dead.Load() + f.retried.Load() + f.other.Load()
	s.Counts["store_succeeded"] = int64(c.Succeeded)
	s.Counts["store_ready"] = int64(c.Ready)
	s.Counts["store_running"] = int64(c.Running)

	if o.API != "" {
		if err := apiSubmit(ctx, s, o, progress); err != nil {
			s.Notes = append(s.Notes, "API submit: "+err.Error())
		}
	}
	s.Finish()
	return s, nil
}

// ticker calls f every 100ms until the returned stop is called.
func Ticker(ctx context.Context, f func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// apiSubmit measures POST /v1/tasks and POST /v1/tasks/batch against an ax
// server. The tasks are of type noop and go wherever the server places
// them: run this against a cluster whose workers handle noop (ax dev does).
func apiSubmit(ctx context.Context, s *Summary, o ThroughputOptions, progress Progress) error {
	var opts []client.Option
	if o.APIToken != "" {
		opts = append(opts, client.WithToken(o.APIToken))
	}
	c, err := client.New(o.API, opts...)
	if err != nil {
		return err
	}
	sp := &task.Spec{Type: "noop", Payload: Payload64}
	raw, err := json.Marshal(sp)
	if err != nil {
		return err
	}
	n := o.APITasks
	// One task per request, from SingleConns goroutines.
	var next, done atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	start := time.Now()
	stopBar := Ticker(ctx, func() { progress.Report("api submit", int(done.Load()), n) })
	for range o.SingleConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := c.Submit(ctx, sp); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	stopBar()
	if firstErr != nil {
		return fmt.Errorf("POST /v1/tasks: %w", firstErr)
	}
	s.Add("api_submit_single", float64(n)/time.Since(start).Seconds(), "tasks/s", "higher", "")
	// Batches of client.MaxBatch, one request at a time.
	specs := make([]json.RawMessage, n)
	for i := range specs {
		specs[i] = raw
	}
	start = time.Now()
	resp, err := c.SubmitAll(ctx, specs, func(d, t int) { progress.Report("api batch", d, t) })
	if err != nil {
		return fmt.Errorf("POST /v1/tasks/batch: %w", err)
	}
	s.Add("api_submit_batch", float64(n)/time.Since(start).Seconds(), "tasks/s", "higher", "")
	s.Counts["api_submitted"] = int64(n + resp.Accepted)
	s.Counts["api_rejected"] = int64(resp.Rejected)
	return nil
}

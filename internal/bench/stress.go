package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// StressOptions size the seed's stress test. Zero values take the
// defaults.
type StressOptions struct {
	N           int           // tasks (default 500 000)
	Tenants     int           // submitting tenants, one goroutine each (default 10)
	Batch       int           // tasks per submit call (default 100)
	MaxDuration time.Duration // handler durations are uniform in [0, MaxDuration) (default 20ms)
	FailRate    float64       // share of attempts failing with a retryable error (default 0.05)
	RetryBase   time.Duration // backoff base; cap and max retries stay the defaults (default 50ms)
	WorkerOptions
}

func (o *StressOptions) defaults() {
	if o.N <= 0 {
		o.N = 500000
	}
	if o.Tenants <= 0 {
		o.Tenants = 10
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = 20 * time.Millisecond
	}
	if o.FailRate < 0 {
		o.FailRate = 0
	} else if o.FailRate == 0 {
		o.FailRate = 0.05
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 50 * time.Millisecond
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 256
	}
	o.WorkerOptions.defaults()
}

const stressType = "bench.stress"

var errInjected = errors.New("injected transient failure")

// Stress is the seed article's stress test scaled to one machine: Tenants
// producers submit N tasks as fast as they can while the workers run them
// (durations uniform in [0, MaxDuration), FailRate of attempts failing
// with a retryable error); a stand-in leader promotes retries (default
// backoff, RetryBase) and reaps lost leases. It reports the seed's table.
func Stress(ctx context.Context, e *Env, o StressOptions, progress Progress) (*Summary, error) {
	o.defaults()
	s := NewSummary("seed-stress")
	s.Redis = e.RedisDescription(ctx)
	s.Params = map[string]any{"n": o.N, "tenants": o.Tenants, "batch": o.Batch, "max_duration": o.MaxDuration.String(),
		"fail_rate": o.FailRate, "retry_base": o.RetryBase.String(), "workers": o.Workers, "concurrency": o.Concurrency,
		"claim_batch": o.ClaimBatch, "payload_bytes": len(Payload64)}
	specs := make([]*task.Spec, o.Tenants)
	for i := range specs {
		sp, err := Spec(stressType, Payload64, func(sp *task.Spec) {
			sp.Tenant = fmt.Sprintf("tenant-%d", i)
			sp.RetryBase = task.Duration(o.RetryBase)
		})
		if err != nil {
			return nil, err
		}
		specs[i] = sp
	}
	var attempts, injected atomic.Int64
	handler := func(ctx context.Context, t *worker.Task) error {
		attempts.Add(1)
		if d := rand.N(o.MaxDuration); d > 0 {
			tm := time.NewTimer(d)
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				return ctx.Err()
			}
		}
		if rand.Float64() < o.FailRate {
			injected.Add(1)
			return errInjected
		}
		return nil
	}
	f, err := e.startFleet(o.WorkerOptions, map[string]worker.Handler{stressType: handler}, nil)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	lctx, stopLeader := context.WithCancel(ctx)
	leaderDone := make(chan error, 1)
	go func() { leaderDone <- e.leader(lctx) }()
	defer func() { stopLeader(); <-leaderDone }()

	// The backlog, sampled.
	var maxReady, maxPending atomic.Int64
	stopSampler := Ticker(ctx, func() {
		if c, err := e.Store.Tasks().Counts(ctx); err == nil {
			maxReady.Store(max(maxReady.Load(), int64(c.Ready)))
			maxPending.Store(max(maxPending.Load(), int64(c.Pending)))
		}
	})
	defer stopSampler()

	m := e.StartMeter(ctx)
	start := time.Now()
	per := (o.N + o.Tenants - 1) / o.Tenants
	var wg sync.WaitGroup
	errc := make(chan error, o.Tenants)
	var submitted atomic.Int64
	var submitDone time.Duration
	for i := range o.Tenants {
		n := min(per, o.N-i*per)
		if n <= 0 {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mk := func(int) queue.NewTask { return queue.NewTask{Spec: specs[i], Pool: e.Target.Pool, Pinned: true} }
			if err := e.SubmitBatches(ctx, n, o.Batch, 1, mk, func(k int) { submitted.Add(int64(k)) }); err != nil {
				errc <- err
			}
		}()
	}
	go func() { wg.Wait(); submitDone = time.Since(start); close(errc) }()
	finished := func() int64 { return f.succeeded.Load() + f.dead.Load() }
	if err := Await(ctx, "seed stress", o.N, finished, progress); err != nil {
		return nil, err
	}
	if err := <-errc; err != nil {
		return nil, err
	}
	run := s.AddPhase("seed stress", int64(o.N), m.Stop(ctx))
	c, err := e.Store.Tasks().Counts(ctx)
	if err != nil {
		return nil, err
	}
	dead := f.dead.Load()
	retries := f.retried.Load()
	s.Add("throughput", run.PerS, "tasks/s", "higher", "")
	s.Add("final_failure_rate", float64(dead)/float64(o.N)*100, "%", "lower", "")
	s.Add("max_backlog_ready", float64(maxReady.Load()), "tasks", "", "")
	s.Add("avg_retries_per_task", float64(retries)/float64(o.N), "retries", "", "")
	s.Add("dead_letters", float64(c.Dead), "tasks", "lower", "")
	s.Add("injected_failure_rate", float64(injected.Load())/float64(max(1, attempts.Load()))*100, "%", "", "")
	s.Add("submit_rate", float64(o.N)/submitDone.Seconds(), "tasks/s", "", "")
	s.Add("redis_cpu_per_task", run.RedisUsPer, "µs", "lower", "")
	s.Add("ax_cpu_per_task", run.AxUsPer, "µs", "lower", "")
	s.Tables = append(s.Tables, Table{
		Title: "the seed's table (its run: 1 080 tasks/s with 16 workers, durations 100ms–2s)",
		Head:  []string{"THROUGHPUT", "FAILURE RATE AFTER RETRIES", "MAX BACKLOG (READY)", "AVG RETRIES/TASK", "DEAD LETTERS"},
		Rows: [][]string{{fmt.Sprintf("%.0f tasks/s", run.PerS), fmt.Sprintf("%.4f %%", float64(dead)/float64(o.N)*100),
			fmt.Sprint(maxReady.Load()), fmt.Sprintf("%.4f", float64(retries)/float64(o.N)), fmt.Sprint(c.Dead)}},
	})
	s.Counts["submitted"] = submitted.Load()
	s.Counts["succeeded"] = f.succeeded.Load()
	s.Counts["dead"] = dead
	s.Counts["retries"] = retries
	s.Counts["attempts"] = attempts.Load()
	s.Counts["injected_failures"] = injected.Load()
	s.Counts["max_pending"] = maxPending.Load()
	s.Counts["store_dead"] = int64(c.Dead)
	s.Counts["store_succeeded"] = int64(c.Succeeded)
	s.Finish()
	return s, nil
}

// leader stands in for the region leader: it promotes due retries (pinned
// tasks become READY) as soon as they are due and reaps expired leases.
func (e *Env) leader(ctx context.Context) error {
	f := queue.Fence{Name: "bench", Token: 1}
	nextReap := time.Now()
	for ctx.Err() == nil {
		r, err := e.Store.Maintainer().Promote(ctx, f, queue.MaxBatch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if time.Now().After(nextReap) {
			if _, _, err := e.Store.Maintainer().Reap(ctx, f, queue.MaxBatch); err != nil && ctx.Err() == nil {
				return err
			}
			nextReap = time.Now().Add(100 * time.Millisecond)
		}
		if r.Moved == queue.MaxBatch {
			continue
		}
		// Sleep until the next due retry, a few ms at most: new retries
		// arrive all the time and nothing wakes this loop.
		wait := 5 * time.Millisecond
		if !r.NextDue.IsZero() {
			wait = min(wait, max(time.Until(r.NextDue), time.Millisecond))
		}
		SleepCtx(ctx, wait)
	}
	return nil
}

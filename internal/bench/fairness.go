package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// FairnessOptions size a noisy-neighbour run. Zero values take the
// defaults.
type FairnessOptions struct {
	Flood int     // tenant A's tasks, queued before the workers start (default 200 000)
	Rate  float64 // tenant B's tasks/s while A's drain (default 10)
	// OnFirst runs the phase with a fair share first: the second phase runs
	// on a Redis holding the first's finished tasks (their sweep), so
	// swapping the order tells that and load changes from the fair claim.
	OnFirst bool
	WorkerOptions
}

func (o *FairnessOptions) defaults() {
	if o.Flood <= 0 {
		o.Flood = 200000
	}
	if o.Rate <= 0 {
		o.Rate = 10
	}
	o.WorkerOptions.defaults()
}

const fairType = "bench.fair"

// Fairness is the noisy neighbour (docs/fairness.md): tenant A queues Flood
// no-op tasks, then the workers start and tenant B submits Rate tasks/s
// (open loop) until A's are drained. Twice: without a fair share on the
// pool, then with one (A and B weight 1). B's wait (ready → handler start
// and submit → start) and Redis CPU per task of the drain, for each.
func Fairness(ctx context.Context, e *Env, o FairnessOptions, progress Progress) (*Summary, error) {
	o.defaults()
	s := NewSummary("fairness")
	s.Redis = e.RedisDescription(ctx)
	s.Params = map[string]any{"flood": o.Flood, "rate_b": o.Rate, "on_first": o.OnFirst, "workers": o.Workers, "concurrency": o.Concurrency,
		"claim_batch": o.ClaimBatch, "payload_bytes": 64}
	pool := e.Target.Pool
	f := queue.Fence{Name: "bench", Token: 1}
	var redisUs [2]float64
	arms := []string{"off", "on"}
	if o.OnFirst {
		arms = []string{"on", "off"}
	}
	for _, name := range arms {
		arm := 0
		if name == "on" {
			arm = 1
		}
		var fs map[string]queue.FairShare
		if name == "on" {
			fs = map[string]queue.FairShare{pool: {Tenants: map[string]queue.TenantShare{"a": {Weight: 1}, "b": {Weight: 1}}}}
		}
		if err := e.Store.Maintainer().SetFairShare(ctx, f, fs); err != nil {
			return nil, err
		}
		spA, err := Spec(fairType, Payload64, func(sp *task.Spec) { sp.Tenant = "a" })
		if err != nil {
			return nil, err
		}
		mk := func(int) queue.NewTask { return queue.NewTask{Spec: spA, Pool: pool, Pinned: true} }
		if err := e.SubmitBatches(ctx, o.Flood, queue.MaxBatch, 2, mk, func(k int) { progress.Report("flood "+name, k, o.Flood) }); err != nil {
			return nil, err
		}
		var readyStart, submitStart Samples
		var doneA, doneB atomic.Int64
		handler := func(_ context.Context, t *worker.Task) error {
			if t.Tenant != "b" {
				return nil
			}
			now := time.Now()
			if !t.ReadyAt.IsZero() {
				readyStart.Add(wholeMs(now, t.ReadyAt))
			}
			if at, ok := payloadTime(t.Payload); ok {
				submitStart.Add(now.Sub(at))
			}
			return nil
		}
		onFinish := func(t *worker.Task, st task.State, _ time.Duration) {
			if st != task.Success {
				return
			}
			if t.Tenant == "b" {
				doneB.Add(1)
			} else {
				doneA.Add(1)
			}
		}
		fl, err := e.startFleet(o.WorkerOptions, map[string]worker.Handler{fairType: handler}, onFinish)
		if err != nil {
			return nil, err
		}
		m := e.StartMeter(ctx)
		t0 := time.Now()
		sentB := 0
		tick := time.NewTicker(time.Millisecond)
		for doneA.Load() < int64(o.Flood) && ctx.Err() == nil {
			<-tick.C
			due := int(time.Since(t0).Seconds() * o.Rate)
			for ; sentB < due; sentB++ {
				at := t0.Add(time.Duration(float64(sentB) / o.Rate * float64(time.Second)))
				sp, err := Spec(fairType, latencyPayload(at), func(sp *task.Spec) { sp.Tenant = "b" })
				if err == nil {
					_, err = e.Store.Submitter().Submit(ctx, queue.NewTask{Spec: sp, Pool: pool, Pinned: true})
				}
				if err != nil {
					tick.Stop()
					fl.stop()
					return nil, fmt.Errorf("submit: %w", err)
				}
			}
			progress.Report("drain "+name, int(doneA.Load()), o.Flood)
		}
		tick.Stop()
		err = Await(ctx, "b "+name, sentB, doneB.Load, progress)
		u := m.Stop(ctx)
		fl.stop()
		if err != nil {
			return nil, err
		}
		p := s.AddPhase("drain, fair share "+name, int64(o.Flood+sentB), u)
		redisUs[arm] = p.RedisUsPer
		rs, ss := readyStart.Dist(), submitStart.Dist()
		s.Add("b_ready_to_start_p50_"+name, Ms(rs.P50), "ms", "lower", "")
		s.Add("b_ready_to_start_p99_"+name, Ms(rs.P99), "ms", "lower", "")
		s.Add("b_ready_to_start_max_"+name, Ms(rs.Max), "ms", "lower", "")
		s.Add("b_submit_to_start_p99_"+name, Ms(ss.P99), "ms", "lower", "")
		s.Add("b_tasks_"+name, float64(rs.N), "tasks", "", "")
	}
	if redisUs[0] > 0 {
		s.Add("redis_us_per_task_on_vs_off", 100*(redisUs[1]/redisUs[0]-1), "%", "lower", "≤ 15")
	}
	if err := e.Store.Maintainer().SetFairShare(ctx, f, nil); err != nil {
		return nil, err
	}
	s.Finish()
	return s, nil
}

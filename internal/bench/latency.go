package bench

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// LatencyOptions size a latency run. Zero values take the defaults.
type LatencyOptions struct {
	// Rate is the open-loop submission rate in tasks/s. 0: half of the peak
	// measured first: PeakTasks tasks submitted while the workers drain them
	// (5 000/s if that fails).
	Rate      float64
	PeakTasks int           // default 30 000
	Duration  time.Duration // of the open-loop phase (default 10s)
	// Tick is the pacing step: the tasks due in one tick go out in one
	// submit call (default 1ms).
	Tick time.Duration
	// Idle pickups measured at the end, each after the workers sat idle
	// (default 10).
	Idle int
	WorkerOptions
}

func (o *LatencyOptions) defaults() {
	if o.PeakTasks <= 0 {
		o.PeakTasks = 30000
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Tick <= 0 {
		o.Tick = time.Millisecond
	}
	if o.Idle < 0 {
		o.Idle = 0
	} else if o.Idle == 0 {
		o.Idle = 10
	}
	o.WorkerOptions.defaults()
}

const latencyType = "bench.latency"

// latencyPayload is a 64-byte payload carrying the time the task was meant
// to be submitted (Unix ns), so latencies count from the schedule, not
// from a submission that may have been late (no coordinated omission).
func latencyPayload(at time.Time) []byte {
	b := fmt.Appendf(nil, `{"t":%d,"p":"`, at.UnixNano())
	b = append(b, strings.Repeat("x", max(0, 62-len(b)))...)
	return append(b, `"}`...)
}

func payloadTime(p []byte) (time.Time, bool) {
	i := bytes.Index(p, []byte(`"t":`))
	if i < 0 {
		return time.Time{}, false
	}
	j := i + 4
	k := j
	for k < len(p) && p[k] >= '0' && p[k] <= '9' {
		k++
	}
	ns, err := strconv.ParseInt(string(p[j:k]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// Latency submits tasks open-loop at a fixed rate to running workers and
// measures ready→handler start (the task record's ready time, ms, Redis
// clock, to the handler's start), submit→start and submit→done (counted
// from the scheduled submit time); then the pickup of a woken idle worker.
func Latency(ctx context.Context, e *Env, o LatencyOptions, progress Progress) (*Summary, error) {
	o.defaults()
	s := NewSummary("latency")
	s.Redis = e.RedisDescription(ctx)

	var readyStart, submitStart, submitDone, idle Samples
	var measuring atomic.Bool
	var finished atomic.Int64
	handler := func(_ context.Context, t *worker.Task) error {
		now := time.Now()
		if !measuring.Load() {
			return nil
		}
		if !t.ReadyAt.IsZero() {
			readyStart.Add(wholeMs(now, t.ReadyAt))
		}
		if at, ok := payloadTime(t.Payload); ok {
			submitStart.Add(now.Sub(at))
		}
		return nil
	}
	var idleMu sync.Mutex
	var idleStarted chan time.Time
	idleHandler := func(_ context.Context, t *worker.Task) error {
		now := time.Now()
		idleMu.Lock()
		ch := idleStarted
		idleMu.Unlock()
		if ch != nil {
			ch <- now
		}
		if !t.ReadyAt.IsZero() {
			idle.Add(wholeMs(now, t.ReadyAt))
		}
		return nil
	}
	onFinish := func(t *worker.Task, st task.State, _ time.Duration) {
		if t.Type != latencyType || st != task.Success {
			return
		}
		finished.Add(1)
		if at, ok := payloadTime(t.Payload); ok && measuring.Load() {
			submitDone.Add(time.Since(at))
		}
	}
	noopSp, err := Spec(NoopType, Payload64)
	if err != nil {
		return nil, err
	}
	pool := e.Target.Pool

	handlers := map[string]worker.Handler{
		NoopType:     func(context.Context, *worker.Task) error { return nil },
		latencyType:  handler,
		"bench.idle": idleHandler,
	}
	f, err := e.startFleet(o.WorkerOptions, handlers, onFinish)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	// The peak: PeakTasks no-op tasks submitted (batches, two connections)
	// as fast as they go while the workers drain them — the same work as
	// the open loop, at full speed.
	rate := o.Rate
	if rate <= 0 {
		mk := func(int) queue.NewTask { return queue.NewTask{Spec: noopSp, Pool: pool, Pinned: true} }
		m := e.StartMeter(ctx)
		subErr := make(chan error, 1)
		go func() { subErr <- e.SubmitBatches(ctx, o.PeakTasks, queue.MaxBatch, 2, mk, nil) }()
		if err := Await(ctx, "peak", o.PeakTasks, f.succeeded.Load, progress); err != nil {
			return nil, err
		}
		if err := <-subErr; err != nil {
			return nil, err
		}
		p := s.AddPhase("peak", int64(o.PeakTasks), m.Stop(ctx))
		rate = p.PerS / 2
		s.Add("peak_submit_and_drain", p.PerS, "tasks/s", "higher", "")
		if rate <= 0 {
			rate = 5000
		}
	}
	s.Params = map[string]any{"rate": Round(rate, 1), "duration": o.Duration.String(), "tick": o.Tick.String(),
		"workers": o.Workers, "concurrency": o.Concurrency, "claim_batch": o.ClaimBatch, "payload_bytes": 64}

	// Open loop: every tick, the tasks whose scheduled time has come go out
	// in one call, whatever happened to the previous calls.
	measuring.Store(true)
	total := int(rate * o.Duration.Seconds())
	m := e.StartMeter(ctx)
	lateCalls, err := openLoop(ctx, e, o.Tick, rate, total, noopSp, progress)
	if err != nil {
		return nil, err
	}
	if err := Await(ctx, "finish", total, finished.Load, progress); err != nil {
		return nil, err
	}
	measuring.Store(false)
	run := s.AddPhase("open loop", int64(total), m.Stop(ctx))
	achieved := float64(total) / o.Duration.Seconds()

	// Idle pickups: the workers sit in their blocking wait, then one task.
	idleSp, err := Spec("bench.idle", Payload64)
	if err != nil {
		return nil, err
	}
	if err := idlePickups(ctx, e, o.Idle, idleSp, &idleMu, &idleStarted, progress); err != nil {
		return nil, err
	}

	rs, ss, sd, id := readyStart.Dist(), submitStart.Dist(), submitDone.Dist(), idle.Dist()
	s.Add("rate", achieved, "tasks/s", "", "")
	s.Add("ready_to_start_p50", Ms(rs.P50), "ms", "lower", "")
	s.Add("ready_to_start_p99", Ms(rs.P99), "ms", "lower", "≤ 5")
	s.Add("ready_to_start_max", Ms(rs.Max), "ms", "lower", "")
	s.Add("submit_to_start_p50", Ms(ss.P50), "ms", "lower", "")
	s.Add("submit_to_start_p99", Ms(ss.P99), "ms", "lower", "")
	s.Add("submit_to_done_p50", Ms(sd.P50), "ms", "lower", "")
	s.Add("submit_to_done_p99", Ms(sd.P99), "ms", "lower", "")
	s.Add("submit_to_done_max", Ms(sd.Max), "ms", "lower", "")
	if o.Idle > 0 {
		s.Add("idle_pickup_p50", Ms(id.P50), "ms", "lower", "")
		s.Add("idle_pickup_max", Ms(id.Max), "ms", "lower", "≤ 20")
	}
	s.Add("redis_cpu_per_task", run.RedisUsPer, "µs", "lower", "")
	s.Add("ax_cpu_per_task", run.AxUsPer, "µs", "lower", "")
	s.Counts["submitted"] = int64(total)
	s.Counts["measured_ready_to_start"] = int64(rs.N)
	s.Counts["measured_submit_to_done"] = int64(sd.N)
	s.Counts["succeeded"] = finished.Load()
	s.Counts["idle_pickups"] = int64(id.N)
	s.Counts["late_submit_ticks"] = lateCalls
	s.Notes = append(s.Notes,
		"ready→start: the record's ready time is whole ms of the Redis clock (the same host clock as ax's), so the start is taken in whole ms too: ±1ms resolution",
		"submit→start and submit→done count from each task's scheduled submit time (open loop)")
	s.Finish()
	return s, nil
}

// openLoop submits total tasks at rate, every tick the ones whose scheduled
// time has come in one call, whatever happened to the previous calls; each
// task's payload carries its scheduled time. It returns how many ticks
// found 64 calls still in flight (submission itself lagging).
func openLoop(ctx context.Context, e *Env, every time.Duration, rate float64, total int, noopSp *task.Spec, progress Progress) (int64, error) {
	pool := e.Target.Pool
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var subErr atomic.Value
	var lateCalls int64
	t0 := time.Now()
	tick := time.NewTicker(every)
	sent := 0
	for sent < total && ctx.Err() == nil {
		<-tick.C
		due := min(total, int(time.Since(t0).Seconds()*rate))
		if due <= sent {
			continue
		}
		batch := make([]queue.NewTask, 0, due-sent)
		for i := sent; i < due; i++ {
			at := t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			sp := *noopSp
			sp.Type, sp.Payload = latencyType, latencyPayload(at)
			batch = append(batch, queue.NewTask{Spec: &sp, Pool: pool, Pinned: true})
		}
		sent = due
		select {
		case sem <- struct{}{}:
		default:
			lateCalls++ // 64 calls in flight: submission itself lags
			sem <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for start := 0; start < len(batch); start += queue.MaxBatch {
				if _, err := e.Store.Submitter().Submit(ctx, batch[start:min(start+queue.MaxBatch, len(batch))]...); err != nil {
					subErr.Store(err)
				}
			}
		}()
		if sent%1000 < len(batch) {
			progress.Report("open loop", sent, total)
		}
	}
	tick.Stop()
	wg.Wait()
	if err, _ := subErr.Load().(error); err != nil {
		return lateCalls, fmt.Errorf("submit: %w", err)
	}
	return lateCalls, nil
}

// idlePickups submits n tasks one at a time, each after the workers have
// sat idle a while, and waits until a worker starts it (published through
// *started, guarded by idleMu).
func idlePickups(ctx context.Context, e *Env, n int, idleSp *task.Spec, idleMu *sync.Mutex, started *chan time.Time, progress Progress) error {
	for i := range n {
		progress.Report("idle pickup", i, n)
		wait := time.Duration(300+100*(i%5)) * time.Millisecond
		if !SleepCtx(ctx, wait) {
			return ctx.Err()
		}
		ch := make(chan time.Time, 1)
		idleMu.Lock()
		*started = ch
		idleMu.Unlock()
		if _, err := e.Store.Submitter().Submit(ctx, queue.NewTask{Spec: idleSp, Pool: e.Target.Pool, Pinned: true}); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			return fmt.Errorf("bench: an idle worker did not pick a task up within 5s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	progress.Report("idle pickup", n, n)
	return nil
}

// wholeMs is b−a with both truncated to the millisecond: the resolution of
// the times a task record keeps.
func wholeMs(b, a time.Time) time.Duration {
	return time.Duration(b.UnixMilli()-a.UnixMilli()) * time.Millisecond
}

// SleepCtx sleeps d; false when ctx ended first.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

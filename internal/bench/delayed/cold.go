package delayed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/internal/bench"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
)

// ColdOptions size `ax bench delayed --cold`.
type ColdOptions struct {
	N          int           // delayed tasks waiting (default 1 000 000)
	Rate       float64       // tasks due per second from the first due time on (default 1 000)
	Horizon    time.Duration // the store's cold horizon (default 30s)
	Window     time.Duration // steady promotion measured for this long (default 30s)
	Batch      int           // tasks per submit call (default 1 000)
	Submitters int           // goroutines submitting (default 2)
}

func (o *ColdOptions) defaults() {
	if o.N <= 0 {
		o.N = 1000000
	}
	if o.Rate <= 0 {
		o.Rate = 1000
	}
	if o.Horizon <= 0 {
		o.Horizon = 30 * time.Second
	}
	if o.Window <= 0 {
		o.Window = 30 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = queue.MaxBatch
	}
	if o.Submitters <= 0 {
		o.Submitters = 2
	}
}

// Cold measures the cold tier (queue/cold.go): N tasks pinned to the
// bench's pool, 64 B payload, due one after another at Rate per second from
// a first due time a day ahead, are submitted (every one lands in the
// cold tier); Redis memory per task is the used_memory delta over the
// submission ÷ N (index hashes, bucket lists, one template per submit call
// holding the payload, the bucket set, the event stream's entries and
// counters: everything the submission added). Then the region leader's two
// loops run as region.Cell runs them — the cold loop (PromoteCold every
// quarter horizon) and the promote loop (Promote, sleeping until the next
// due time, at most 1 s) — for Window after the first due time; lateness is
// each task's promote call end − its due time; SLOWLOG (logging every
// command from the window's start) gives the longest script.
func Cold(ctx context.Context, e *bench.Env, o ColdOptions, progress bench.Progress) (*bench.Summary, error) {
	if e.Clustered() {
		return nil, errors.New("bench delayed --cold: not on a cluster (its SLOWLOG and memory figures are one server's)")
	}
	if !e.Managed() {
		return nil, errors.New("bench delayed --cold: on a temporary Redis only (it measures used_memory and SLOWLOG of the whole server)")
	}
	o.defaults()
	s := bench.NewSummary("delayed-cold")
	s.Redis = e.RedisDescription(ctx)
	s.Params = map[string]any{"n": o.N, "rate": o.Rate, "horizon": o.Horizon.String(), "window": o.Window.String(),
		"batch": o.Batch, "submitters": o.Submitters, "payload_bytes": len(bench.Payload64)}
	// The store's clock (the scripts' too) runs ahead of the wall clock by
	// skew: the tasks are due a day after the submission starts, and once
	// it is over the clock jumps to a horizon before the first due time, so
	// the run does not wait for the day, nor depend on how fast the
	// machine submits. Every figure is taken on this clock.
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	opts := e.Store.Options()
	opts.ColdHorizon, opts.Now = o.Horizon, now
	benv, err := e.WithStore(opts)
	if err != nil {
		return nil, err
	}
	st := benv.Store
	rdb := e.Client()
	first := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	gap := time.Duration(float64(time.Second) / o.Rate)
	dueOf := func(i int) time.Time { return first.Add(time.Duration(i) * gap) }
	base, err := bench.Spec(bench.NoopType, bench.Payload64)
	if err != nil {
		return nil, err
	}
	mk := func(i int) queue.NewTask {
		sp := *base
		d := dueOf(i)
		sp.RunAt = &d
		return queue.NewTask{Spec: &sp, Pool: e.Target.Pool, Pinned: true}
	}
	mem0 := e.RedisMemory(ctx)
	var sent atomic.Int64
	stopBar := bench.Ticker(ctx, func() { progress.Report("submit", int(sent.Load()), o.N) })
	m := e.StartMeter(ctx)
	err = benv.SubmitBatches(ctx, o.N, o.Batch, o.Submitters, mk, func(k int) { sent.Add(int64(k)) })
	stopBar()
	if err != nil {
		return nil, err
	}
	sub := s.AddPhase("submit", int64(o.N), m.Stop(ctx))
	cold, err := st.Tasks().ColdWaiting(ctx)
	if err != nil {
		return nil, err
	}
	if cold != o.N {
		return nil, fmt.Errorf("bench: %d of %d tasks in the cold tier after the submission", cold, o.N)
	}
	perTask := float64(e.RedisMemory(ctx)-mem0) / float64(o.N)

	// The steady phase starts a little before the first due time: the cold
	// loop has moved the first buckets by then.
	if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		return nil, err
	}
	if err := rdb.ConfigSet(ctx, "slowlog-max-len", "1000000").Err(); err != nil {
		return nil, err
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		return nil, err
	}
	skew.Store(int64(first.Add(-o.Horizon).Sub(time.Now())))
	want := int(o.Window.Seconds() * o.Rate)
	f := queue.Fence{Name: "bench", Token: 1}
	lctx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var wg sync.WaitGroup
	var coldMoved atomic.Int64
	var coldErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := coldLoop(lctx, st, f, o.Horizon, now, &coldMoved); err != nil && lctx.Err() == nil {
			coldErr = err
		}
	}()
	m = e.StartMeter(ctx)
	p, err := promoteLoop(ctx, st, f, want, now, dueOf, progress)
	if err != nil {
		return nil, err
	}
	promoted := p.moved
	stopLoops()
	wg.Wait()
	pro := s.AddPhase("steady", int64(promoted), m.Stop(ctx))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if coldErr != nil {
		return nil, coldErr
	}
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return nil, err
	}
	var scripts, coldScripts bench.Samples
	for _, l := range logs {
		if len(l.Args) == 0 || !isScript(l.Args[0]) {
			continue
		}
		scripts.Add(l.Duration)
		for _, a := range l.Args {
			if a == "promote" {
				coldScripts.Add(l.Duration)
				break
			}
		}
	}
	sd, cd, ld := scripts.Dist(), coldScripts.Dist(), p.late.Dist()
	left, err := st.Tasks().ColdWaiting(ctx)
	if err != nil {
		return nil, err
	}
	s.Add("cold_bytes_per_task", perTask, "B", "lower", "≤ 120")
	s.Add("submit_cold", sub.PerS, "tasks/s", "higher", "")
	s.Add("submit_redis_cpu_per_task", sub.RedisUsPer, "µs", "lower", "")
	s.Add("lateness_p50", bench.Ms(ld.P50), "ms", "lower", "")
	s.Add("lateness_p99", bench.Ms(ld.P99), "ms", "lower", "≤ 10")
	s.Add("lateness_max", bench.Ms(ld.Max), "ms", "lower", "")
	s.Add("longest_script", bench.Ms(sd.Max), "ms", "lower", "≤ 10")
	s.Add("script_p99", bench.Ms(sd.P99), "ms", "lower", "")
	s.Add("longest_cold_promote_script", bench.Ms(cd.Max), "ms", "lower", "")
	s.Add("cold_promote_script_p50", bench.Ms(cd.P50), "ms", "lower", "")
	s.Add("longest_promote_call_client", bench.Ms(p.longestCall), "ms", "lower", "")
	s.Add("steady_redis_cpu_per_task", pro.RedisUsPer, "µs", "lower", "")
	s.Counts["submitted"] = int64(o.N)
	s.Counts["cold_after_submit"] = int64(cold)
	s.Counts["promoted_in_window"] = int64(promoted)
	s.Counts["moved_cold_to_hot"] = coldMoved.Load()
	s.Counts["cold_left"] = int64(left)
	s.Counts["promote_calls"] = int64(p.calls)
	s.Counts["cold_promote_scripts"] = int64(cd.N)
	s.Counts["slowlog_entries"] = int64(len(logs))
	s.Finish()
	return s, nil
}

// coldLoop runs the region leader's cold loop as region.Cell does: PromoteCold
// every quarter horizon (at most 30s), sooner when the next bucket is due
// within half a horizon, at once while a call moves a full batch. It adds
// what it moves to moved and returns when ctx ends (nil) or a call fails.
func coldLoop(ctx context.Context, st *store.Store, f queue.Fence, horizon time.Duration, now func() time.Time, moved *atomic.Int64) error {
	every := min(30*time.Second, horizon/4)
	for ctx.Err() == nil {
		n, next, err := st.Maintainer().PromoteCold(ctx, f, queue.MaxBatch)
		if err != nil {
			return err
		}
		moved.Add(int64(n))
		if n >= queue.MaxBatch {
			continue
		}
		wait := every
		if !next.IsZero() {
			wait = min(every, max(next.Add(-horizon/2).Sub(now()), time.Second))
		}
		if !bench.SleepCtx(ctx, wait) {
			return nil
		}
	}
	return nil
}

// promoteLoop runs the region leader's promote loop as region.Cell does:
// Promote, at once again while a call moves a full batch, else sleeping
// until the next due time (at most 1s), until want tasks moved or ctx
// ends; lateness is each task's call end − its due time (dueOf, in order).
func promoteLoop(ctx context.Context, st *store.Store, f queue.Fence, want int, now func() time.Time, dueOf func(int) time.Time, progress bench.Progress) (*promotion, error) {
	p := &promotion{}
	for p.moved < want && ctx.Err() == nil {
		t := now()
		r, err := st.Maintainer().Promote(ctx, f, queue.MaxBatch)
		if err != nil {
			return p, err
		}
		end := now()
		p.calls++
		p.longestCall = max(p.longestCall, end.Sub(t))
		for j := p.moved; j < p.moved+r.Moved; j++ {
			p.late.Add(end.Sub(dueOf(j)))
		}
		p.moved += r.Moved
		if p.calls%50 == 0 {
			progress.Report("promote", p.moved, want)
		}
		if r.Moved == queue.MaxBatch {
			continue
		}
		next := time.Second
		if !r.NextDue.IsZero() {
			next = min(max(r.NextDue.Sub(now()), time.Millisecond), time.Second)
		}
		if !bench.SleepCtx(ctx, next) {
			break
		}
	}
	return p, nil
}

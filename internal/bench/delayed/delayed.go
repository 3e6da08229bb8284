package delayed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/internal/bench"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Options size a delayed-promotion run. Zero values take the
// defaults.
type Options struct {
	N            int // delayed tasks (default 1 000 000)
	Batch        int // tasks per submit call (default 1 000)
	Submitters   int // goroutines submitting (default 2)
	PromoteBatch int // most tasks one promote call moves (default queue.MaxBatch)
	// Lead is the time from the start of submission to the common due
	// time; it must cover the submission. 0: N ÷ 40 000/s + 3s.
	Lead time.Duration
	// Unpinned submits the tasks unplaced, as the API does: promotion
	// moves them to the due set, and the leader reads them (DueTasks) and
	// places them (Place, every task in the bench's pool). The placement
	// decision itself (placement.Placer, ~0.5 µs) is not included.
	Unpinned bool
}

func (o *Options) defaults() {
	if o.N <= 0 {
		o.N = 1000000
	}
	if o.Batch <= 0 {
		o.Batch = queue.MaxBatch
	}
	if o.Submitters <= 0 {
		o.Submitters = 2
	}
	if o.PromoteBatch <= 0 || o.PromoteBatch > queue.MaxBatch {
		o.PromoteBatch = queue.MaxBatch
	}
	if o.Lead <= 0 {
		o.Lead = time.Duration(float64(o.N)/40000*float64(time.Second)) + 3*time.Second
	}
}

// Run submits N tasks pinned to the bench's pool, all due at the same
// whole second, then runs the leader's promote call (bounded batches,
// fenced) until every one is READY. It reports the promotion rate, the
// lateness (batch done − due time) and the longest single script from
// SLOWLOG (on its own Redis it logs every command: slowlog-log-slower-than
// 0).
func Run(ctx context.Context, e *bench.Env, o Options, progress bench.Progress) (*bench.Summary, error) {
	if e.Clustered() {
		return nil, errors.New("bench delayed: not on a cluster (its SLOWLOG figures are one server's)")
	}
	o.defaults()
	s := bench.NewSummary("delayed")
	s.Redis = e.RedisDescription(ctx)
	s.Params = map[string]any{"n": o.N, "batch": o.Batch, "submitters": o.Submitters, "promote_batch": o.PromoteBatch,
		"lead": o.Lead.String(), "payload_bytes": len(bench.Payload64), "unpinned": o.Unpinned}
	rdb := e.Client()
	if e.Managed() {
		if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
			return nil, err
		}
		if err := rdb.ConfigSet(ctx, "slowlog-max-len", fmt.Sprint(2*o.N/o.PromoteBatch+10000)).Err(); err != nil {
			return nil, err
		}
	} else {
		cfg, _ := rdb.ConfigGet(ctx, "slowlog-log-slower-than").Result()
		s.Notes = append(s.Notes, "external Redis: SLOWLOG keeps only scripts slower than its slowlog-log-slower-than ("+
			cfg["slowlog-log-slower-than"]+" µs) and its slowlog-max-len newest")
	}
	due := time.Now().Add(o.Lead).Truncate(time.Second).Add(time.Second)
	sp, err := bench.Spec(bench.NoopType, bench.Payload64, func(sp *task.Spec) { sp.RunAt = &due })
	if err != nil {
		return nil, err
	}
	mem0 := e.RedisMemory(ctx)
	var sent atomic.Int64
	mk := func(int) queue.NewTask { return queue.NewTask{Spec: sp, Pool: e.Target.Pool, Pinned: true} }
	if o.Unpinned {
		mk = func(int) queue.NewTask { return queue.NewTask{Spec: sp} }
	}
	m := e.StartMeter(ctx)
	sctx, cancel := context.WithCancel(ctx)
	var tooSlow atomic.Bool
	stopBar := bench.Ticker(ctx, func() {
		n := sent.Load()
		progress.Report("submit", int(n), o.N)
		// Stop early when the submission would not finish before the due time.
		if el := time.Since(m.Started()); n > 0 && el > time.Second &&
			m.Started().Add(time.Duration(float64(el)*float64(o.N)/float64(n))).After(due.Add(-200*time.Millisecond)) {
			tooSlow.Store(true)
			cancel()
		}
	})
	err = e.SubmitBatches(sctx, o.N, o.Batch, o.Submitters, mk, func(k int) { sent.Add(int64(k)) })
	stopBar()
	cancel()
	if tooSlow.Load() {
		return nil, fmt.Errorf("bench: submitting %d tasks would not finish before their due time %v after the start: pass a longer --lead", o.N, o.Lead)
	}
	if err != nil {
		return nil, err
	}
	sub := s.AddPhase("submit", int64(o.N), m.Stop(ctx))
	c, err := e.Store.Tasks().Counts(ctx)
	if err != nil {
		return nil, err
	}
	if c.Pending != o.N {
		return nil, fmt.Errorf("bench: %d of %d tasks are delayed after the submission (the rest were due already): pass a longer --lead", c.Pending, o.N)
	}
	perTask := float64(e.RedisMemory(ctx)-mem0) / float64(o.N)

	// Only entries newer than this one count: a live Redis's own SLOWLOG is
	// not reset under its operators.
	var lastID int64 = -1
	if e.Managed() {
		if err := rdb.SlowLogReset(ctx).Err(); err != nil {
			return nil, err
		}
	} else if last, err := rdb.SlowLogGet(ctx, 1).Result(); err == nil && len(last) > 0 {
		lastID = last[0].ID
	}
	for wait := time.Until(due); wait > 0; wait = time.Until(due) {
		progress.Report("wait for due", int(o.Lead-wait)/int(time.Millisecond), int(o.Lead/time.Millisecond))
		if !bench.SleepCtx(ctx, min(wait, 100*time.Millisecond)) {
			return nil, ctx.Err()
		}
	}
	m = e.StartMeter(ctx)
	p, err := promoteAll(ctx, e, o, due, progress)
	if err != nil {
		return nil, err
	}
	ready := p.ready
	progress.Report("promote", ready, o.N)
	pro := s.AddPhase("promote", int64(ready), m.Stop(ctx))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return nil, err
	}
	var scripts bench.Samples
	var over10 int
	for _, l := range logs {
		if l.ID <= lastID || len(l.Args) == 0 || !isScript(l.Args[0]) {
			continue
		}
		scripts.Add(l.Duration)
		if l.Duration > 10*time.Millisecond {
			over10++
		}
	}
	sd := scripts.Dist()
	longest := sd.Max
	c, err = e.Store.Tasks().Counts(ctx)
	if err != nil {
		return nil, err
	}
	ld := p.late.Dist()
	s.Add("promote_rate", pro.PerS, "tasks/s", "higher", "≥ 200000")
	s.Add("lateness_p50", bench.Ms(ld.P50), "ms", "lower", "")
	s.Add("lateness_p99", bench.Ms(ld.P99), "ms", "lower", "")
	s.Add("lateness_max", bench.Ms(ld.Max), "ms", "lower", "")
	s.Add("longest_script", bench.Ms(longest), "ms", "lower", "≤ 10")
	s.Add("script_p50", bench.Ms(sd.P50), "ms", "lower", "")
	s.Add("script_p99", bench.Ms(sd.P99), "ms", "lower", "")
	s.Add("longest_promote_call_client", bench.Ms(p.longestCall), "ms", "lower", "")
	s.Add("submit_delayed", sub.PerS, "tasks/s", "higher", "")
	s.Add("redis_bytes_per_delayed_task", perTask, "B", "lower", "")
	s.Add("promote_redis_cpu_per_task", pro.RedisUsPer, "µs", "lower", "")
	s.Counts["submitted"] = int64(o.N)
	s.Counts["promoted"] = int64(p.moved)
	s.Counts["made_ready"] = int64(ready)
	s.Counts["ready_after"] = int64(c.Ready)
	s.Counts["promote_calls"] = int64(p.calls)
	s.Counts["slowlog_entries"] = int64(len(logs))
	s.Counts["scripts_over_10ms"] = int64(over10)
	s.Finish()
	return s, nil
}

// promotion is what promoteAll did.
type promotion struct {
	late        bench.Samples // batch done − due time, per task
	longestCall time.Duration // longest single call, seen by the client
	calls       int
	moved       int // promoted
	ready       int // READY: promoted (pinned) or placed (unpinned)
}

// promoteAll runs the leader's promote call (and, for unpinned tasks, its
// DueTasks and Place calls) until o.N tasks are READY or ctx ends; the
// caller checks ctx.
func promoteAll(ctx context.Context, e *bench.Env, o Options, due time.Time, progress bench.Progress) (*promotion, error) {
	p := &promotion{}
	f := queue.Fence{Name: "bench", Token: 1}
	for p.ready < o.N && ctx.Err() == nil {
		t := time.Now()
		r, err := e.Store.Maintainer().Promote(ctx, f, o.PromoteBatch)
		if err != nil {
			return p, err
		}
		now := time.Now()
		p.calls++
		p.longestCall = max(p.longestCall, now.Sub(t))
		p.moved += r.Moved
		if !o.Unpinned {
			p.ready += r.Moved
			p.late.AddN(now.Sub(due), r.Moved)
		}
		for o.Unpinned {
			t := time.Now()
			ts, err := e.Store.Maintainer().DueTasks(ctx, o.PromoteBatch)
			if err != nil || len(ts) == 0 {
				if err != nil {
					return p, err
				}
				break
			}
			as := make([]queue.Assignment, len(ts))
			for i, tk := range ts {
				as[i] = queue.Assignment{ID: tk.ID, Pool: e.Target.Pool}
			}
			pl, err := e.Store.Maintainer().Place(ctx, f, as)
			if err != nil {
				return p, err
			}
			now := time.Now()
			p.calls++
			p.longestCall = max(p.longestCall, now.Sub(t))
			p.ready += pl.Placed
			p.late.AddN(now.Sub(due), pl.Placed)
		}
		if r.Moved == 0 {
			if !bench.SleepCtx(ctx, time.Millisecond) {
				break
			}
		}
		if p.calls%20 == 0 {
			progress.Report("promote", p.ready, o.N)
		}
	}
	return p, nil
}

// isScript reports whether a SLOWLOG entry's command runs one of the
// store's scripts: FCALL (the function library) or EVALSHA (Redis without
// Functions).
func isScript(cmd string) bool {
	c := strings.ToLower(cmd)
	return strings.HasPrefix(c, "fcall") || strings.HasPrefix(c, "eval")
}

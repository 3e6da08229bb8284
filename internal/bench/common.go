package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// Progress is told how far the current phase got; total 0 means unknown.
// It is called from one goroutine at a time.
type Progress func(phase string, done, total int)

// Report calls p, when not nil.
func (p Progress) Report(phase string, done, total int) {
	if p != nil {
		p(phase, done, total)
	}
}

// WorkerOptions size the worker side of a run: Workers workers of the
// bench's pool in this process, each with Concurrency slots.
type WorkerOptions struct {
	Workers     int // default 2
	Concurrency int // slots per worker (default 128)
	ClaimBatch  int // default worker.DefaultClaimBatch
}

func (o *WorkerOptions) defaults() {
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 128
	}
	if o.ClaimBatch <= 0 {
		o.ClaimBatch = worker.DefaultClaimBatch
	}
}

// fleet is the running workers, counting outcomes by the state the store
// moved each task to.
type fleet struct {
	ws     []*worker.Worker
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// Outcomes by the state the store moved a task to.
	succeeded, dead, retried, other atomic.Int64
}

// startFleet starts the workers with handlers; onFinish (optional) sees
// every recorded outcome after the fleet counted it.
func (e *Env) startFleet(o WorkerOptions, handlers map[string]worker.Handler, onFinish func(*worker.Task, task.State, time.Duration)) (*fleet, error) {
	o.defaults()
	f := &fleet{}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	for i := range o.Workers {
		w, err := worker.New(e.Store.Claimer(), worker.Options{
			Pool: e.Target.Pool, ID: fmt.Sprintf("bench-%d", i), Concurrency: o.Concurrency, ClaimBatch: o.ClaimBatch,
			ShutdownGrace: 5 * time.Second, Logger: e.Target.Log,
			OnFinish: func(t *worker.Task, st task.State, rt time.Duration) {
				switch st {
				case task.Success:
					f.succeeded.Add(1)
				case task.Failed:
					f.dead.Add(1)
				case task.Pending:
					f.retried.Add(1)
				default:
					f.other.Add(1)
				}
				if onFinish != nil {
					onFinish(t, st, rt)
				}
			},
		})
		if err != nil {
			cancel()
			return nil, err
		}
		for typ, h := range handlers {
			w.Handle(typ, h)
		}
		f.ws = append(f.ws, w)
	}
	for _, w := range f.ws {
		f.wg.Add(1)
		go func() { defer f.wg.Done(); _ = w.Run(ctx) }()
	}
	return f, nil
}

// stop shuts every worker down and waits for them.
func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
}

func (f *fleet) claimed() int64 {
	var n uint64
	for _, w := range f.ws {
		n += w.Stats().Claimed
	}
	return int64(n)
}

// Payload64 is a 64-byte JSON payload, as in the targets.
var Payload64 = []byte(`{"k":"` + strings.Repeat("x", 56) + `"}`)

// spec returns a normalized spec of typ with payload; mods adjust it first.
func Spec(typ string, payload []byte, mods ...func(*task.Spec)) (*task.Spec, error) {
	sp := &task.Spec{Type: typ, Payload: payload}
	for _, m := range mods {
		m(sp)
	}
	if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
		return nil, err
	}
	return sp, nil
}

// SubmitBatches submits n tasks made by mk(i) in calls of batch tasks from
// conns goroutines; done is told after each call how many were sent.
func (e *Env) SubmitBatches(ctx context.Context, n, batch, conns int, mk func(i int) queue.NewTask, done func(k int)) error {
	batch = max(1, min(batch, queue.MaxBatch))
	conns = max(1, conns)
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]queue.NewTask, 0, batch)
			for ctx.Err() == nil {
				start := int(next.Add(int64(batch))) - batch
				if start >= n {
					return
				}
				buf = buf[:0]
				for i := start; i < min(start+batch, n); i++ {
					buf = append(buf, mk(i))
				}
				res, err := e.Store.Submitter().Submit(ctx, buf...)
				if err == nil {
					for _, r := range res {
						if r.Err != nil {
							err = r.Err
							break
						}
					}
				}
				if err != nil {
					errc <- fmt.Errorf("submit: %w", err)
					return
				}
				if done != nil {
					done(len(buf))
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}

// errStalled: nothing moved for stallAfter; the run gives up instead of
// hanging.
var errStalled = errors.New("no progress")

const stallAfter = 30 * time.Second

// await calls progress every 100ms until count() reaches total, ctx ends,
// or count stops moving for stallAfter.
func Await(ctx context.Context, phase string, total int, count func() int64, progress Progress) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	last, lastMove, lastReport := int64(-1), time.Now(), time.Time{}
	for {
		n := count()
		now := time.Now()
		if now.Sub(lastReport) >= 100*time.Millisecond || n >= int64(total) {
			progress.Report(phase, int(n), total)
			lastReport = now
		}
		if n >= int64(total) {
			return nil
		}
		if n != last {
			last, lastMove = n, now
		} else if now.Sub(lastMove) > stallAfter {
			return fmt.Errorf("bench: %s: %w for %v at %d of %d", phase, errStalled, stallAfter, n, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

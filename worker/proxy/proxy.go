package proxy

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/claim"
	"github.com/ax-sched/ax/queue/read"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// CallTimeout bounds one store call made for a remote worker.
const CallTimeout = 5 * time.Second

// MaxTypes bounds the task types one remote worker registers.
const MaxTypes = queue.MaxWorkerTypes

// Proxy claims and records for remote workers through the region's claim
// stage.
type Proxy struct {
	c     *claim.Claimer
	tasks *read.Tasks
	bells *bells
	log   *slog.Logger
}

// New returns a proxy over the region's claim stage; log (nil: none) gets
// the give-backs that failed.
func New(c *claim.Claimer, log *slog.Logger) *Proxy {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Proxy{c: c, tasks: read.New(c.Engine), bells: newBells(c), log: log}
}

// Worker is a remote worker as the region sees it.
type Worker struct {
	ID, Pool string
	Slots    int
	// AnyType: it is handed tasks of every type; else those of Types
	// (none when Types is empty).
	AnyType bool
	Types   []string
}

// types is w's task types as the store takes them.
func (w Worker) types() queue.Types {
	if w.AnyType {
		return queue.AnyType
	}
	t, err := queue.ServeTypes(w.Types...)
	if err != nil {
		return queue.AnyType
	}
	return t
}

// Lease is how long a claimed task stays a worker's without a heartbeat.
func (p *Proxy) Lease() time.Duration { return p.c.Options().Lease }

// Alive registers w alive in its pool, holding nothing: a pool's published
// slots are its live workers'.
func (p *Proxy) Alive(ctx context.Context, w Worker) error {
	_, err := p.c.Heartbeat(ctx, w.ID, w.Pool, w.Slots, w.types(), nil)
	return err
}

// Heartbeat extends the leases of the tasks w holds and registers it
// alive. The tasks the store says to stop are ended here, as a direct
// worker ends them once its handler stopped, and returned with their
// reason on the wire.
func (p *Proxy) Heartbeat(ctx context.Context, w Worker, held []apiv1.WorkerLease) ([]apiv1.WorkerStop, error) {
	leases := make([]queue.Lease, 0, len(held))
	for _, l := range held {
		leases = append(leases, queue.Lease{ID: l.ID, Token: l.Lease})
	}
	stops, err := p.c.Heartbeat(ctx, w.ID, w.Pool, w.Slots, w.types(), leases)
	if err != nil {
		return nil, err
	}
	out := make([]apiv1.WorkerStop, 0, len(stops))
	for _, s := range stops {
		reason, err := p.end(ctx, s)
		if err != nil {
			return nil, err
		}
		out = append(out, apiv1.WorkerStop{ID: s.ID, Reason: reason})
	}
	return out, nil
}

// end records how a task the store stopped ends and names the stop on the
// wire.
func (p *Proxy) end(ctx context.Context, s queue.Stop) (string, error) {
	var err error
	reason := apiv1.StopLeaseLost
	switch s.Why {
	case queue.StopCanceled:
		reason = apiv1.StopCanceled
		_, _, err = p.c.Fail(ctx, queue.Failure{ID: s.ID, Token: s.Token, Error: "canceled while running", Retryable: true})
	case queue.StopPreempted:
		reason = apiv1.StopPreempted
		// READY again after as long as a direct worker's preempted tasks.
		d := worker.DefaultPreemptDelayMin + rand.N(worker.DefaultPreemptDelayMax-worker.DefaultPreemptDelayMin)
		_, err = p.c.Return(ctx, s.ID, s.Token, task.ReasonPreempted, d)
	case queue.StopDeadline:
		reason = apiv1.StopDeadline
		_, _, err = p.c.Fail(ctx, queue.Failure{ID: s.ID, Token: s.Token, Retryable: true, Reason: task.ReasonDeadline,
			Error: "timeout: the attempt ran past its deadline"})
	}
	if err != nil && !lostLease(err) {
		return "", err
	}
	return reason, nil
}

// lostLease reports whether err says the task is no longer the worker's.
func lostLease(err error) bool {
	return errors.Is(err, queue.ErrLeaseLost) || errors.Is(err, task.ErrNotFound) || errors.Is(err, task.ErrBadID)
}

package proxy

import (
	"context"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// refusedDelay is how long a task of a tenant the worker may not serve
// waits before it is READY again: the claim that returned it does not take
// it again at once.
const refusedDelay = time.Second

// fullPause is how long a claim that met a task its worker's room could
// not fit waits before it answers empty: a worker whose room is taken by
// small tasks claims about once a second until one ends.
const fullPause = time.Second

// Request asks for tasks on a remote worker's behalf.
type Request struct {
	Worker Worker
	// N is how many tasks it may take (0: none, the claim waits out Wait).
	N int
	// Room, when > 0, is the worker's free room in milli-slots: the tasks
	// taken fit it together (queue.ClaimRequest.Room).
	Room int
	// Wait bounds the wait for a first task.
	Wait time.Duration
	// Accept reports whether the worker may be handed a task of tenant.
	Accept func(tenant string) bool
	// Keep records the tasks about to be handed out; when it fails they go
	// back.
	Keep func([]*task.Task) error
	// Taking (nil: none) is called before each store claim; when it fails
	// the claim ends with its error, having taken nothing.
	Taking func() error
}

// Claimed is what a claim handed out, and how many tasks it gave back
// because Accept refused their tenant.
type Claimed struct {
	Tasks   []*task.Task
	Refused int
}

// Claim claims up to r.N tasks of r.Worker's pool and types, waiting up to
// r.Wait for a first one. Tasks of tenants Accept refuses go back unseen
// (TENANT_REFUSED, no attempt spent); the tasks claimed when ctx has ended
// or Keep failed go back too (WORKER_SHUTDOWN), so nothing is claimed for
// a worker that will not run it.
func (p *Proxy) Claim(ctx context.Context, r Request) (Claimed, error) {
	var out Claimed
	w := r.Worker
	types := w.types()
	end := time.Now().Add(r.Wait)
	wasted := 0
	for {
		left := time.Until(end)
		if r.N <= 0 {
			// No free slot: wait out the poll (the worker asks again
			// after its next outcome).
			sleep(ctx, left)
			return out, nil
		}
		if r.Taking != nil {
			if err := r.Taking(); err != nil {
				return out, err
			}
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CallTimeout)
		c, err := p.c.ClaimTasks(cctx, queue.ClaimRequest{Pool: w.Pool, Worker: w.ID, N: r.N, Types: types, Room: r.Room})
		cancel()
		keep, refused := p.refuse(c.Tasks, r.Accept)
		out.Refused += refused
		if len(keep) > 0 {
			if ctx.Err() != nil {
				// The worker left: nobody will run them.
				p.giveBack(keep, task.ReasonWorkerShutdown, 0)
				return out, ctx.Err()
			}
			if err := r.Keep(keep); err != nil {
				p.giveBack(keep, task.ReasonWorkerShutdown, 0)
				return out, err
			}
			out.Tasks = keep
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if left <= 0 || ctx.Err() != nil {
			return out, nil
		}
		if c.Full && len(c.Tasks) == 0 {
			// The next task does not fit the worker's room: answer empty
			// after a while (the worker asks again, its room perhaps grown
			// by an outcome reported meanwhile to any server).
			sleep(ctx, min(left, fullPause))
			return out, nil
		}
		switch {
		case c.Parked > 0 && c.Parked < left:
			sleep(ctx, c.Parked)
		case len(c.Tasks) > 0:
			sleep(ctx, min(refusedDelay, left))
		default:
			if wasted > 0 {
				// A wake-up for tasks this worker does not serve: another
				// claimer's; let it take them before listening again.
				sleep(ctx, min(20*time.Millisecond<<min(wasted-1, 6), left))
			}
			if p.bells.wait(ctx, w.Pool, min(time.Until(end), bellPoll)) {
				wasted++
			} else {
				wasted = 0
			}
		}
	}
}

// refuse gives back the tasks of tenants accept refuses and returns the
// others and how many it gave back.
func (p *Proxy) refuse(ts []*task.Task, accept func(string) bool) ([]*task.Task, int) {
	var keep, foreign []*task.Task
	for _, t := range ts {
		if accept(t.Tenant) {
			keep = append(keep, t)
		} else {
			foreign = append(foreign, t)
		}
	}
	p.giveBack(foreign, task.ReasonTenantRefused, refusedDelay)
	return keep, len(foreign)
}

// giveBack returns claimed tasks, READY again after delay; a failure
// leaves them to the reaper.
func (p *Proxy) giveBack(ts []*task.Task, reason string, delay time.Duration) {
	for _, t := range ts {
		ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
		if _, err := p.c.Return(ctx, t.ID, t.LeaseToken, reason, delay); err != nil {
			p.log.Warn("remote worker: giving a task back failed; the reaper takes it after its lease", "task", t.ID, "err", err)
		}
		cancel()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

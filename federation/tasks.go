package federation

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// maxHops bounds forwarding: a server forwards to the id's home region,
// which may forward once more to where the task was handed off.
const maxHops = 2

// Get finds a task wherever it lives.
func (n *Node) Get(ctx context.Context, id string, hops int) (*task.Task, error) {
	t, err := n.store.Get(ctx, id)
	switch {
	case err == nil && t.State == task.HandedOff && hops < maxHops:
		var remote task.Task
		if err := n.Proxy(ctx, t.HandedOffTo, http.MethodGet, taskPath(id, ""), nil, &remote); err != nil {
			if isPeerNotFound(err) {
				return t, nil // the forwarding record is all we know
			}
			return nil, &HolderUnreachableError{Record: t, Err: err}
		}
		return &remote, nil
	case errors.Is(err, task.ErrNotFound) && hops < maxHops:
		if home, ok := n.forwardTarget(id); ok {
			var remote task.Task
			if err := n.Proxy(ctx, home, http.MethodGet, taskPath(id, ""), nil, &remote); err != nil {
				return nil, err
			}
			return &remote, nil
		}
	}
	return t, err
}

// HolderUnreachableError is Get's error when the task was handed to a
// region that did not answer: Err (a 503 with Retry-After) with this
// region's forwarding record, whose tenant lets the API answer a caller
// who may not see the task as it answers an id that does not exist.
type HolderUnreachableError struct {
	Record *task.Task
	Err    error
}

func (e *HolderUnreachableError) Error() string { return e.Err.Error() }
func (e *HolderUnreachableError) Unwrap() error { return e.Err }

// carried reports whether a trail came with its task from another region
// (it has a RECEIVED step): it is then the task's whole history.
func carried(tr []task.Transition) bool {
	for _, s := range tr {
		if s.Reason == task.ReasonReceived {
			return true
		}
	}
	return false
}

// Trail returns a task's transitions wherever it lives: the holder's trail,
// which a hand-off carries from region to region (from an older sender
// that carried none, the home part followed by the receiver's).
func (n *Node) Trail(ctx context.Context, id string, hops int) ([]task.Transition, error) {
	tr, err := n.store.Trail(ctx, id)
	if errors.Is(err, task.ErrNotFound) && hops < maxHops {
		if home, ok := n.forwardTarget(id); ok {
			var r apiv1.TrailResponse
			if err := n.Proxy(ctx, home, http.MethodGet, taskPath(id, "/trail"), nil, &r); err != nil {
				return nil, err
			}
			return r.Transitions, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if t, gerr := n.store.Get(ctx, id); gerr == nil && t.State == task.HandedOff && hops < maxHops {
		var r apiv1.TrailResponse
		err := n.Proxy(ctx, t.HandedOffTo, http.MethodGet, taskPath(id, "/trail"), nil, &r)
		switch {
		case err == nil:
			if carried(r.Transitions) {
				// The holder's trail holds this region's steps too: the
				// hand-off carried them.
				return r.Transitions, nil
			}
			tr = append(tr, r.Transitions...)
			sort.SliceStable(tr, func(i, j int) bool { return tr[i].At.Before(tr[j].At) })
		case holderUnavailable(err):
			// The holder has the task's later steps but cannot tell them
			// now: 503 and retry, not a trail that silently ends at
			// HANDED_OFF (as GET of the task answers too).
			return nil, err
		}
		// Otherwise (the holder lost the record: 404) this region's steps
		// are all there is.
	}
	return tr, nil
}

// TaskOp is an operator action on one task.
type TaskOp int

const (
	OpCancel TaskOp = iota
	OpReplay
	OpPriority
)

// Act cancels, replays or re-prioritises a task wherever it lives. For
// cancel the state returned is CANCELED or RUNNING (requested).
func (n *Node) Act(ctx context.Context, op TaskOp, id string, priority int, by string, hops int) (task.State, error) {
	var st task.State
	var err error
	switch op {
	case OpCancel:
		st, err = n.store.Cancel(ctx, id, task.ReasonCanceledByUser, by)
	case OpReplay:
		err = n.store.Replay(ctx, id, by)
		st = task.Pending
	case OpPriority:
		err = n.store.SetPriority(ctx, id, priority, by)
	}
	if err == nil {
		n.wake()
	}
	target := ""
	var ho *queue.HandedOffError
	switch {
	case errors.As(err, &ho):
		target = ho.Region
	case errors.Is(err, task.ErrNotFound):
		target, _ = n.forwardTarget(id)
	}
	if target == "" || hops >= maxHops {
		return st, err
	}
	// The holder records the caller, not "cluster" (it trusts
	// on_behalf_of only with the cluster token this call carries).
	q := "?" + url.Values{apiv1.ParamOnBehalfOf: {by}}.Encode()
	switch op {
	case OpCancel:
		var r apiv1.CancelResponse
		if err := n.Proxy(ctx, target, http.MethodPost, taskPath(id, "/cancel")+q, struct{}{}, &r); err != nil {
			return "", err
		}
		return r.State, nil
	case OpReplay:
		return task.Pending, n.Proxy(ctx, target, http.MethodPost, taskPath(id, "/replay")+q, struct{}{}, nil)
	default:
		return "", n.Proxy(ctx, target, http.MethodPost, taskPath(id, "/priority")+q, apiv1.PriorityRequest{Priority: &priority}, nil)
	}
}

func isPeerNotFound(err error) bool {
	var pe *PeerError
	return errors.As(err, &pe) && pe.Status == http.StatusNotFound
}

// Drain moves READY tasks of this region to pools elsewhere through the
// hand-off outbox, at most rate per second. It returns how many it moved.
func (n *Node) Drain(ctx context.Context, rate int) (int, error) {
	return n.drain(ctx, "", rate, nil)
}

// drain moves READY tasks of one pool ("" = every pool) elsewhere; a leader
// loop passes its fence (nil: an operator's drain).
func (n *Node) drain(ctx context.Context, pool string, rate int, f *queue.Fence) (int, error) {
	if rate <= 0 {
		rate = 200
	}
	now := n.cfg.Now()
	vs := n.view.current()
	snap := vs.pools
	moved := 0
	var batch []queue.DrainMove
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var fs []queue.Fence
		if f != nil {
			fs = append(fs, *f)
		}
		k, err := n.store.Drain(ctx, batch, fs...)
		moved += k
		batch = batch[:0]
		if err != nil {
			return err
		}
		// Rate limit: rate tasks per second.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(k) * time.Second / time.Duration(rate)):
		}
		return nil
	}
	err := n.store.Waiting(ctx, queue.Filter{State: task.Ready, Pool: pool}, func(ts []*task.Task) error {
		for _, t := range ts {
			allowed := t.Regions
			pt := placement.Task{Type: t.Type, Tags: t.Tags, Regions: without(allowed, n.cfg.Region, n.cfg.Regions),
				Critical: t.Critical, Priority: t.Priority, Home: n.cfg.Region, MaxWait: time.Duration(t.MaxWait)}
			d := n.placer.Place(snap, pt, now)
			if t.MaxPricePerSlotHour > 0 {
				ex := n.placer.Explain(snap, pt, now)
				ex.CapPrice(t.MaxPricePerSlotHour)
				d = ex.Decision
			}
			if !d.OK || d.Region == n.cfg.Region {
				continue // nowhere else to go now: it stays
			}
			n.metrics.decision(n.cfg.Region, d)
			batch = append(batch, queue.DrainMove{ID: t.ID, Region: d.Region, Pool: d.Pool})
			n.flights.add(t.ID, d.Region, d.Pool, vs.updated[d.Region], now)
			if len(batch) >= min(rate, 500) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return moved, err
	}
	return moved, flush()
}

// without returns the allowed regions minus one (all regions when allowed
// is empty).
func without(allowed []string, drop string, all []string) []string {
	src := allowed
	if len(src) == 0 {
		src = all
	}
	out := make([]string, 0, len(src))
	for _, r := range src {
		if r != drop {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return []string{"-"} // nothing allowed
	}
	return out
}

// holderUnavailable reports whether err is a region that did not answer, or
// answered that it cannot serve right now (503: its store is down).
func holderUnavailable(err error) bool {
	var pe *PeerError
	return errors.Is(err, ErrRegionUnavailable) || errors.As(err, &pe) && pe.Status == http.StatusServiceUnavailable
}

package fanout

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sort"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// maxHops bounds forwarding: a server forwards to the id's home region,
// which may forward once more to where the task was handed off.
const maxHops = 2

// Get finds a task wherever it lives.
func (rd *Reader) Get(ctx context.Context, id string, hops int) (*task.Task, error) {
	return rd.GetAs(ctx, id, hops, "")
}

// GetAs is Get for a caller who sees only tenant's tasks ("": every
// tenant's). Another tenant's task is task.ErrNotFound, decided on the
// first record read: a forwarding record of another tenant's handed-off
// task is not followed, so its 404 costs what a missing id's does and
// tells nothing of where the task went.
func (rd *Reader) GetAs(ctx context.Context, id string, hops int, tenant string) (*task.Task, error) {
	t, err := rd.cfg.Store.Get(ctx, id)
	switch {
	case err == nil && tenant != "" && t.Tenant != tenant:
		return nil, task.ErrNotFound
	case err == nil && t.State == task.HandedOff && hops < maxHops:
		var remote task.Task
		if err := rd.cfg.Peer.Proxy(ctx, t.HandedOffTo, http.MethodGet, peer.TaskPath(id, ""), nil, &remote); err != nil {
			if peer.NotFound(err) {
				return t, nil // the forwarding record is all we know
			}
			return nil, &HolderUnreachableError{Record: t, Err: err}
		}
		return &remote, nil
	case errors.Is(err, task.ErrNotFound) && hops < maxHops:
		if home, ok := rd.cfg.Peer.Home(id); ok {
			var remote task.Task
			if err := rd.cfg.Peer.Proxy(ctx, home, http.MethodGet, peer.TaskPath(id, ""), nil, &remote); err != nil {
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
func (rd *Reader) Trail(ctx context.Context, id string, hops int) ([]task.Transition, error) {
	tr, err := rd.cfg.Store.Trail(ctx, id)
	if errors.Is(err, task.ErrNotFound) && hops < maxHops {
		if home, ok := rd.cfg.Peer.Home(id); ok {
			var r apiv1.TrailResponse
			if err := rd.cfg.Peer.Proxy(ctx, home, http.MethodGet, peer.TaskPath(id, "/trail"), nil, &r); err != nil {
				return nil, err
			}
			return r.Transitions, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if t, gerr := rd.cfg.Store.Get(ctx, id); gerr == nil && t.State == task.HandedOff && hops < maxHops {
		var r apiv1.TrailResponse
		err := rd.cfg.Peer.Proxy(ctx, t.HandedOffTo, http.MethodGet, peer.TaskPath(id, "/trail"), nil, &r)
		switch {
		case err == nil:
			if carried(r.Transitions) {
				// The holder's trail holds this region's steps too: the
				// hand-off carried them.
				return r.Transitions, nil
			}
			tr = append(tr, r.Transitions...)
			sort.SliceStable(tr, func(i, j int) bool { return tr[i].At.Before(tr[j].At) })
		case peer.Unavailable(err):
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
func (rd *Reader) Act(ctx context.Context, op TaskOp, id string, priority int, by string, hops int) (task.State, error) {
	var st task.State
	var err error
	switch op {
	case OpCancel:
		st, err = rd.cfg.Store.Cancel(ctx, id, task.ReasonCanceledByUser, by)
	case OpReplay:
		err = rd.cfg.Store.Replay(ctx, id, by)
		st = task.Pending
	case OpPriority:
		err = rd.cfg.Store.SetPriority(ctx, id, priority, by)
	}
	if err == nil {
		rd.wake()
	}
	target := ""
	var ho *queue.HandedOffError
	switch {
	case errors.As(err, &ho):
		target = ho.Region
	case errors.Is(err, task.ErrNotFound):
		target, _ = rd.cfg.Peer.Home(id)
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
		if err := rd.cfg.Peer.Proxy(ctx, target, http.MethodPost, peer.TaskPath(id, "/cancel")+q, struct{}{}, &r); err != nil {
			return "", err
		}
		return r.State, nil
	case OpReplay:
		return task.Pending, rd.cfg.Peer.Proxy(ctx, target, http.MethodPost, peer.TaskPath(id, "/replay")+q, struct{}{}, nil)
	default:
		return "", rd.cfg.Peer.Proxy(ctx, target, http.MethodPost, peer.TaskPath(id, "/priority")+q, apiv1.PriorityRequest{Priority: &priority}, nil)
	}
}

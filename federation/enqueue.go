package federation

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Tasks under fixed ids, for the packages that derive them (schedule: one
// per slot; dag: one per node) and reach the federation through small
// interfaces of their own: Node implements schedule.Enqueuer and dag.Tasks
// (the checks are in contracts_test.go, which may import them; this package
// does not).

// Enqueue submits sp under the fixed id into the region home, unplaced:
// into this region's store when home is this region, else through home's
// internal endpoint (POST /v1/internal/enqueue). created is false when a
// task with the id exists already; refused is home's refusal of the task
// itself (invalid there: a *task.FieldError, or the peer's 400, 413 or
// 422), which sending again cannot change, or the tenant's max_backlog
// there full (*QuotaError, the peer's 429 naming max_backlog): the slot is
// refused as an API submit would be. The region that stores the task
// normalizes it with its own clock.
func (n *Node) Enqueue(ctx context.Context, home, id string, sp *task.Spec) (created bool, refused, err error) {
	// A schedule's slot is a submit of its tenant: past a refuse budget the
	// slot is given up, past a cap budget the task carries the cap.
	if err := n.applyBudget(sp); err != nil {
		return false, err, nil
	}
	if home == n.cfg.Region {
		created, _, err := n.EnqueueFixed(ctx, id, sp)
		var fe *task.FieldError
		var qe *QuotaError
		if errors.As(err, &fe) || errors.As(err, &qe) {
			return false, err, nil
		}
		return created, nil, err
	}
	api, err := n.peerAPI(home)
	if err != nil {
		return false, nil, err
	}
	spec, err := json.Marshal(sp)
	if err != nil {
		return false, nil, err
	}
	n.metrics.forwarded.WithLabelValues(n.cfg.Region, home).Inc()
	var resp apiv1.ScheduleEnqueueResponse
	_, err = n.call(ctx, api, http.MethodPost, "/v1/internal/enqueue", apiv1.ScheduleEnqueue{ID: id, Spec: spec}, &resp)
	var pe *PeerError
	if errors.As(err, &pe) && (pe.Status == http.StatusBadRequest || pe.Status == http.StatusRequestEntityTooLarge ||
		pe.Status == http.StatusUnprocessableEntity || pe.Status == http.StatusTooManyRequests && pe.Body.Field == "max_backlog") {
		return false, err, nil
	}
	if err != nil {
		return false, nil, err
	}
	return resp.Created, nil, nil
}

// EnqueueFixed accepts a task under a fixed id in this region, unplaced
// (the region leader places it when due). created is false when a task
// with the id exists already; state is the task's state either way. A
// schedule's slot is checked against its tenant's max_backlog here in the
// submit script, as an API submit is (a *QuotaError when full, nothing
// stored): however many schedules were created at once, their slots never
// pass it together.
func (n *Node) EnqueueFixed(ctx context.Context, id string, sp *task.Spec) (created bool, state task.State, err error) {
	if err := sp.Normalize(n.cfg.Defaults, n.cfg.Now()); err != nil {
		return false, "", err
	}
	max := n.backlogMax(sp)
	res, err := n.SubmitFixed(ctx, queue.NewTask{ID: id, Spec: sp, BacklogMax: max})
	if err != nil {
		return false, "", err
	}
	r := res[0]
	switch {
	case errors.Is(r.Err, queue.ErrBacklogFull):
		n.metrics.rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
		return false, "", &QuotaError{Field: "max_backlog", Tenant: sp.Tenant, Max: max}
	case errors.Is(r.Err, task.ErrExists):
		return false, r.State, nil
	case r.Err != nil:
		return false, "", r.Err
	}
	return true, r.State, nil
}

// SubmitFixed stores tasks (normalized, with their fixed ids) in this
// region, unplaced: the region leader places each one when due, and is
// woken to do it now. It counts the tasks it created. The results are
// queue.Store.Submit's: an id held already is task.ErrExists.
func (n *Node) SubmitFixed(ctx context.Context, tasks ...queue.NewTask) ([]queue.SubmitResult, error) {
	// A DAG's nodes were admitted with their run (BudgetRoom): past a cap
	// budget they carry the cap; they are not refused one by one.
	for _, t := range tasks {
		n.capBudget(t.Spec)
	}
	res, err := n.store.Submit(ctx, tasks...)
	if err != nil {
		return nil, err
	}
	for k, r := range res {
		if r.Err == nil {
			n.metrics.submit(n.cfg.Region, tasks[k].Spec.Tenant, tasks[k].Spec.Type)
		}
	}
	n.wake()
	return res, nil
}

// Unfinished reports whether the task id exists and has not ended, wherever
// it is held. A task no region knows (expired after its retention) has
// finished.
func (n *Node) Unfinished(ctx context.Context, id string) (bool, error) {
	t, err := n.Get(ctx, id, 0)
	switch {
	case errors.Is(err, task.ErrNotFound), isPeerNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return !t.State.Terminal(), nil
}

// CancelTask asks the task id to stop wherever it is held, as by, through
// the task cancel path (Act), from this server as the origin of the call
// (a task is at most one forward away). A task missing or ended already,
// here or in the region that holds it, is not an error.
func (n *Node) CancelTask(ctx context.Context, id, by string) error {
	_, err := n.Act(WithHops(ctx, 0), OpCancel, id, 0, by, 0)
	var te *task.TransitionError
	var pe *PeerError
	switch {
	case err == nil, errors.Is(err, task.ErrNotFound), errors.As(err, &te):
		return nil
	case errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusConflict):
		return nil // the region that holds it says so: missing, or ended
	}
	return err
}

// wake tells the region's cell that tasks arrived, so its leader places
// them now rather than at its next pass.
func (n *Node) wake() {
	if n.cell != nil {
		n.cell.Wake()
	}
}

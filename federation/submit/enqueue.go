package submit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/submit"
	"github.com/ax-sched/ax/task"
)

// Tasks under fixed ids, for the packages that derive them (schedule: one
// per slot; dag: one per node) and reach the federation through small
// interfaces of their own (schedule.Enqueuer, dag.Tasks).

// Enqueue submits sp under the fixed id into the region home, unplaced:
// into this region's store when home is this region, else through home's
// internal endpoint (POST /v1/internal/enqueue). created is false when a
// task with the id exists already; refused is home's refusal of the task
// itself (invalid there: a *task.FieldError, or the peer's 400, 413 or
// 422), which sending again cannot change, or the tenant's max_backlog
// there full (*QuotaError, the peer's 429 naming max_backlog): the slot is
// refused as an API submit would be. The region that stores the task
// normalizes it with its own clock.
func (n *Pipeline) Enqueue(ctx context.Context, home, id string, sp *task.Spec) (created bool, refused, err error) {
	// A schedule's slot is a submit of its tenant: past a refuse budget the
	// slot is given up, past a cap budget the task carries the cap.
	if err := n.cfg.Budgets.Apply(sp); err != nil {
		return false, err, nil
	}
	if home == n.cfg.Region {
		created, _, err := n.EnqueueFixed(ctx, id, sp)
		var fe *task.FieldError
		var qe *QuotaError
		var be *budget.BudgetError
		if errors.As(err, &fe) || errors.As(err, &qe) || errors.As(err, &be) {
			return false, err, nil
		}
		return created, nil, err
	}
	api, err := n.cfg.Peer.API(home)
	if err != nil {
		return false, nil, err
	}
	spec, err := json.Marshal(sp)
	if err != nil {
		return false, nil, err
	}
	n.cfg.Peer.Forwarded(home)
	var resp apiv1.ScheduleEnqueueResponse
	_, err = n.cfg.Peer.Call(ctx, api, http.MethodPost, "/v1/internal/enqueue", apiv1.ScheduleEnqueue{ID: id, Spec: spec}, &resp)
	var pe *peer.Error
	if errors.As(err, &pe) && (pe.Status == http.StatusBadRequest || pe.Status == http.StatusRequestEntityTooLarge ||
		pe.Status == http.StatusUnprocessableEntity || pe.Status == http.StatusTooManyRequests &&
		(pe.Body.Field == "max_backlog" || pe.Body.Code == apiv1.CodeBudgetExceeded)) {
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
// pass it together. While the region's Redis is in its memory reserve
// (Config.MemoryAdmit) the reserve's refusal is returned, nothing stored:
// an error, not a refusal of the task, so the slot is tried again.
func (n *Pipeline) EnqueueFixed(ctx context.Context, id string, sp *task.Spec) (created bool, state task.State, err error) {
	if err := sp.Normalize(n.cfg.Defaults, n.cfg.Now()); err != nil {
		return false, "", err
	}
	if n.cfg.MemoryAdmit != nil {
		if err := n.cfg.MemoryAdmit(ctx, sp.Tenant, len(sp.Payload)); err != nil {
			n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "memory_reserve").Inc()
			return false, "", err
		}
	}
	max, maxBytes := n.backlogMax(sp), n.backlogBytesMax(sp)
	res, err := n.SubmitFixed(ctx, queue.NewTask{ID: id, Spec: sp, BacklogMax: max, BacklogBytesMax: maxBytes,
		Budget: n.holdLater(sp)})
	if err != nil {
		return false, "", err
	}
	r := res[0]
	switch {
	case errors.Is(r.Err, queue.ErrBacklogFull):
		n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
		return false, "", &QuotaError{Field: "max_backlog", Tenant: sp.Tenant, Max: max}
	case errors.Is(r.Err, queue.ErrBacklogBytesFull):
		n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
		return false, "", &QuotaError{Field: "max_backlog_bytes", Tenant: sp.Tenant, Max: int(maxBytes)}
	case errors.Is(r.Err, submit.ErrBudget):
		return false, "", n.cfg.Budgets.Refused(sp.Tenant)
	case errors.Is(r.Err, task.ErrExists):
		return false, r.State, nil
	case r.Err != nil:
		return false, "", r.Err
	}
	return true, r.State, nil
}

// holdLater is the reservation a task stored unplaced (a schedule's slot)
// makes on its tenant's budget ledger when the tenant has a refuse budget:
// its expected cost where it would be placed now ("" none).
func (n *Pipeline) holdLater(sp *task.Spec) string {
	if n.cfg.Budgets.Hold(sp.Tenant, 0) == "" {
		return ""
	}
	return n.cfg.Budgets.Hold(sp.Tenant, n.cfg.Picker.Explain(n.cfg.View.Pools(), sp, n.cfg.Now()).Decision.Expected)
}

// SubmitFixed stores tasks (normalized, with their fixed ids) in this
// region, unplaced: the region leader places each one when due, and is
// woken to do it now. It counts the tasks it created. The results are
// submit.Submitter.Submit's: an id held already is task.ErrExists.
func (n *Pipeline) SubmitFixed(ctx context.Context, tasks ...queue.NewTask) ([]queue.SubmitResult, error) {
	// A DAG's nodes were admitted with their run (BudgetRoom): past a cap
	// budget they carry the cap; they are not refused one by one.
	for _, t := range tasks {
		n.cfg.Budgets.Cap(t.Spec)
	}
	res, err := n.cfg.Store.Submit(ctx, tasks...)
	if err != nil {
		return nil, err
	}
	for k, r := range res {
		if r.Err == nil {
			n.cfg.Metrics.Submit(n.cfg.Region, tasks[k].Spec.Tenant, tasks[k].Spec.Type)
		}
	}
	n.wake()
	return res, nil
}

package dag

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Runs a schedule starts: one per slot, under the run id the federation
// leader derives from (schedule, slot), in the schedule's home region.
// Every leader derives the same id, so a slot started twice (a leader that
// died before recording it) creates one run.

// StartScheduled starts the run sd in the region home: in this region's
// store when home is this region, else through home's internal endpoint
// (POST /v1/internal/dags). created is false when a run with the id exists
// already. refused is set, and err nil, when home refuses the run itself (it
// is invalid there, or the tenant's backlog has no room): sending it again
// cannot help. err is for no answer.
func (r *Runs) StartScheduled(ctx context.Context, home string, sd *apiv1.ScheduledDAG) (created bool, refused, err error) {
	if home != r.cfg.Region {
		var resp apiv1.ScheduledDAGResponse
		err := r.tasks.Proxy(ctx, home, http.MethodPost, "/v1/internal/dags", sd, &resp)
		var pe interface{ HTTPStatus() int }
		if errors.As(err, &pe) && (pe.HTTPStatus() == http.StatusBadRequest || pe.HTTPStatus() == http.StatusRequestEntityTooLarge) {
			return false, err, nil
		}
		if err != nil {
			return false, nil, err
		}
		if resp.Refused != nil {
			return false, resp.Refused, nil
		}
		return resp.Created, nil, nil
	}
	created, err = r.startHere(ctx, sd)
	var fe *task.FieldError
	var ae *apiv1.Error
	if errors.As(err, &fe) || errors.As(err, &ae) {
		return false, err, nil
	}
	return created, nil, err
}

// StartHere is StartScheduled in this region, for the internal endpoint:
// refusals are returned as the response's Refused.
func (r *Runs) StartHere(ctx context.Context, sd *apiv1.ScheduledDAG) (*apiv1.ScheduledDAGResponse, error) {
	created, refused, err := r.StartScheduled(ctx, r.cfg.Region, sd)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.ScheduledDAGResponse{ID: sd.ID, Created: created}
	if refused != nil {
		var fe *task.FieldError
		var ae *apiv1.Error
		switch {
		case errors.As(refused, &ae):
			resp.Refused = ae
		case errors.As(refused, &fe):
			resp.Refused = &apiv1.Error{Code: apiv1.CodeInvalid, Field: fe.Field, Message: fe.Msg}
		default:
			resp.Refused = &apiv1.Error{Code: apiv1.CodeInvalid, Message: refused.Error()}
		}
	}
	return resp, nil
}

// startHere creates the run sd in this region unless it exists. The
// existence check comes first: CreateDAG would reserve backlog room for
// nodes the existing run holds already.
func (r *Runs) startHere(ctx context.Context, sd *apiv1.ScheduledDAG) (bool, error) {
	p, err := task.ParseID(sd.ID)
	if err != nil || p.Region != r.cfg.Region {
		return false, &task.FieldError{Field: "id", Msg: fmt.Sprintf("%q is not a run id of region %s", sd.ID, r.cfg.Region)}
	}
	switch _, err := r.dags.DAG(ctx, sd.ID); {
	case err == nil:
		return false, nil
	case !errors.Is(err, queue.ErrDAGNotFound):
		return false, err
	}
	def, err := r.validate(&sd.DAG, r.cfg.Now())
	if err != nil {
		return false, err
	}
	if err := assignIDs(def, sd.ID); err != nil {
		return false, err
	}
	if err := attachGates(def, sd.Gates); err != nil {
		return false, err
	}
	start, end := sd.Period.Start.UTC(), sd.Period.End.UTC()
	def.Schedule, def.PeriodStart, def.PeriodEnd = sd.Schedule, &start, &end
	if _, err := r.create(ctx, def); err != nil {
		if errors.Is(err, task.ErrExists) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// RunUnfinished reports whether the run id exists and has not ended,
// wherever it lives. A run no region knows (expired) has finished.
func (r *Runs) RunUnfinished(ctx context.Context, id string) (bool, error) {
	st, err := r.Status(ctx, id, 0)
	switch {
	case errors.Is(err, queue.ErrDAGNotFound), isNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return st.State == task.DAGRunning, nil
}

// RunState reads the state of the run id wherever it lives, and when it
// ended; ok is false for a run no region knows.
func (r *Runs) RunState(ctx context.Context, id string) (state task.DAGState, finished *time.Time, ok bool, err error) {
	st, err := r.Status(ctx, id, 0)
	switch {
	case errors.Is(err, queue.ErrDAGNotFound), isNotFound(err):
		return "", nil, false, nil
	case err != nil:
		return "", nil, false, err
	}
	return st.State, st.FinishedAt, true, nil
}

// RunStatus reads the run id wherever it lives; nil when no region knows
// it.
func (r *Runs) RunStatus(ctx context.Context, id string) (*apiv1.DAGStatus, error) {
	st, err := r.Status(ctx, id, 0)
	if errors.Is(err, queue.ErrDAGNotFound) || isNotFound(err) {
		return nil, nil
	}
	return st, err
}

// TaskState reads the task id wherever it is held, and when it ended; ok
// is false for a task no region knows.
func (r *Runs) TaskState(ctx context.Context, id string) (state task.State, finished *time.Time, ok bool, err error) {
	t, err := r.tasks.Get(ctx, id, 0)
	switch {
	case errors.Is(err, task.ErrNotFound), isNotFound(err):
		return "", nil, false, nil
	case err != nil:
		return "", nil, false, err
	}
	return t.State, t.FinishedAt, true, nil
}

// CancelRun cancels the run id wherever it lives, as by; a run missing or
// ended already is not an error.
func (r *Runs) CancelRun(ctx context.Context, id, by string) error {
	_, err := r.Cancel(ctx, id, "", by, 0)
	if errors.Is(err, queue.ErrDAGNotFound) || isNotFound(err) {
		return nil
	}
	return err
}

// isNotFound reports whether err is another region's 404 (Tasks.Proxy's
// error answers have an HTTPStatus method).
func isNotFound(err error) bool {
	var pe interface{ HTTPStatus() int }
	return errors.As(err, &pe) && pe.HTTPStatus() == http.StatusNotFound
}

// periodOf is the period a schedule's run was started for (nil: a run
// not started by a schedule).
func periodOf(def *queue.DAGDef) *apiv1.Period {
	if def.PeriodStart == nil || def.PeriodEnd == nil {
		return nil
	}
	return &apiv1.Period{Start: *def.PeriodStart, End: *def.PeriodEnd}
}

// attachGates gives each node of def its gates (by node id); a gate of a
// node def does not have is refused.
func attachGates(def *queue.DAGDef, gates map[string][]task.Gate) error {
	index := make(map[string]int, len(def.Nodes))
	for i, nd := range def.Nodes {
		index[nd.ID] = i
	}
	for node, gs := range gates {
		i, ok := index[node]
		if !ok {
			return &task.FieldError{Field: "gates", Msg: fmt.Sprintf("gates of unknown node %q", node)}
		}
		def.Nodes[i].Gates = gs
	}
	return nil
}

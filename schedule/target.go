package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/schedule/depend"
	"github.com/ax-sched/ax/schedule/period"
	"github.com/ax-sched/ax/task"
)

// A schedule's target is a task spec (each slot submits one task) or a
// DAG (each slot starts one run). Both get the slot's logical period in
// their payloads (package period) and keep the overlap, misfire, jitter and
// budget policies; this file holds what differs between them.

// DAGStarter is what a DAG schedule needs of the DAG runs; *dag.Runs
// implements it. Every call has a deadline (Config.CallTimeout).
type DAGStarter interface {
	// Check validates a DAG (tenant settled) as POST /v1/dags would,
	// storing nothing. Errors are *task.FieldError naming nodes[i]...
	Check(req *apiv1.DAGRequest) error
	// StartScheduled starts the run sd in the region home once: created
	// is false when a run with its id exists already. refused is set, and
	// err nil, when home refuses the run itself; err is for no answer.
	StartScheduled(ctx context.Context, home string, sd *apiv1.ScheduledDAG) (created bool, refused, err error)
	// RunState reads a run wherever it lives; ok is false when no region
	// knows it (expired: it has finished).
	RunState(ctx context.Context, id string) (state task.DAGState, finished *time.Time, ok bool, err error)
	// RunStatus reads a run wherever it lives; nil when no region knows it.
	RunStatus(ctx context.Context, id string) (*apiv1.DAGStatus, error)
	// CancelRun cancels a run wherever it lives, as by; a run missing or
	// ended already is not an error.
	CancelRun(ctx context.Context, id, by string) error
	// TaskState reads a task wherever it is held, and when it ended; ok is
	// false for a task no region knows.
	TaskState(ctx context.Context, id string) (state task.State, finished *time.Time, ok bool, err error)
}

// runsDAG reports whether d's slots start DAG runs: a DAG schedule's, or
// a single-task schedule's with dependencies (dagOf).
func runsDAG(d *apiv1.Schedule) bool { return d.DAG != nil || len(d.DependsOnSchedules) > 0 }

// dagOf is the run each slot of d starts (runsDAG): its DAG, or one node,
// "task", running its task spec, holding its dependencies.
func dagOf(d *apiv1.Schedule) (*apiv1.DAGRequest, error) {
	if d.DAG != nil {
		return d.DAG, nil
	}
	raw, err := json.Marshal(d.Task)
	if err != nil {
		return nil, err
	}
	return &apiv1.DAGRequest{Name: d.Name, Tenant: tenantOf(d),
		Nodes: []apiv1.DAGNodeSpec{{ID: "task", Task: raw, DependsOnSchedules: d.DependsOnSchedules}}}, nil
}

// given reports whether a raw request field holds a value.
func given(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && string(t) != "null"
}

// decodeDAG strictly decodes a schedule's dag: its shape only (Create
// checks its nodes once the tenant is settled, DAGStarter.Check).
func decodeDAG(raw json.RawMessage) (*apiv1.DAGRequest, error) {
	var dr apiv1.DAGRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&dr); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "unknown field "); i >= 0 {
			return nil, fieldError("dag", msg[i:])
		}
		return nil, fieldError("dag", "must be a DAG as POST /v1/dags takes it: "+msg)
	}
	if dec.More() {
		return nil, fieldError("dag", "trailing data after the DAG")
	}
	for i, nd := range dr.Nodes {
		if !given(nd.Task) {
			continue // Check names it
		}
		sp, err := task.DecodeSpec(nd.Task)
		if err != nil {
			continue // Check names it
		}
		f := fmt.Sprintf("dag.nodes[%d].task.", i)
		switch {
		case sp.RunAt != nil:
			return nil, fieldError(f+"run_at", "a schedule sets each run's time (use jitter to spread runs)")
		case sp.IdempotencyKey != "" || sp.IdempotencyTTL != 0:
			return nil, fieldError(f+"idempotency_key", "each node's task id is derived from the run")
		}
	}
	if err := depend.Check(&dr); err != nil {
		return nil, err
	}
	return &dr, nil
}

// checkDAG validates a DAG schedule's run (tenant settled) as its home
// region will at each slot; errors name dag.<field>.
func (s *Scheduler) checkDAG(dr *apiv1.DAGRequest) error {
	if s.cfg.DAGs == nil {
		return &apiv1.Error{Code: apiv1.CodeUnavailable, Field: "dag", RetryAfterSeconds: 1,
			Message: "this server runs no DAG runs: a DAG schedule cannot be checked here"}
	}
	plain, _ := depend.Strip(dr)
	err := s.cfg.DAGs.Check(&plain)
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return fe.Under("dag")
	}
	return err
}

// periodOf is the logical period of a slot of e.
func (e *entry) periodOf(slot time.Time) apiv1.Period {
	next := e.comp.Next(slot)
	if next.IsZero() {
		next = slot // a last slot: an empty period
	}
	return period.Of(slot, next, e.comp.Loc())
}

// runID is the task id, or DAG run id, of a slot of e.
func (e *entry) runID(slot time.Time) string { return taskID(e.IDSeq(), slot, e.Def.HomeRegion) }

// unfinished reports whether the run id of e (its task or its DAG run)
// exists and has not ended.
func (s *Scheduler) unfinished(ctx context.Context, e *entry, id string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if !runsDAG(e.Def) {
		return s.tasks.Unfinished(cctx, id)
	}
	if s.cfg.DAGs == nil {
		return false, errNoDAGs
	}
	state, _, ok, err := s.cfg.DAGs.RunState(cctx, id)
	return ok && state == task.DAGRunning, err
}

// cancelRun cancels the run id of e, as by.
func (s *Scheduler) cancelRun(ctx context.Context, e *entry, id, by string) error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if !runsDAG(e.Def) {
		return s.tasks.CancelTask(cctx, id, by)
	}
	if s.cfg.DAGs == nil {
		return errNoDAGs
	}
	return s.cfg.DAGs.CancelRun(cctx, id, by)
}

var errNoDAGs = errors.New("schedule: this server runs no DAG runs")

// start submits the run of one slot under id, to start at runAt: the
// slot's task, or its DAG run, created now, whose root nodes' tasks run at
// runAt (the jitter delays the whole run); waits are a downstream rerun's
// (gates). Results are Enqueuer.Enqueue's.
func (s *Scheduler) start(ctx context.Context, t *term, e *entry, slot time.Time, id string, runAt time.Time, waits []apiv1.RerunWait) (created bool, refused, err error) {
	d := e.Def
	p := e.periodOf(slot)
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if !runsDAG(d) {
		sp := *d.Task
		sp.RunAt = &runAt
		sp.Payload = period.Render(sp.Payload, p, d.Name)
		sp.ScheduleEnd = task.ScheduleEndOf(tenantOf(d), d.Name, slot)
		return s.tasks.Enqueue(cctx, d.HomeRegion, id, &sp)
	}
	if s.cfg.DAGs == nil {
		return false, nil, errNoDAGs
	}
	if s.cfg.BudgetRoom != nil {
		if err := s.cfg.BudgetRoom(tenantOf(d)); err != nil {
			return false, err, nil
		}
	}
	dr, err := dagOf(d)
	if err != nil {
		return false, nil, err
	}
	plain, deps := depend.Strip(dr)
	sd := &apiv1.ScheduledDAG{ID: id, Schedule: d.Name, Period: p, DAG: plain}
	if deps {
		gates, err := s.gates(ctx, e, p, waits, func(name string) *entry { return t.lookup(s.store, e.Tenant(), name) })
		if err != nil {
			return false, nil, err
		}
		sd.Gates = gates
	}
	for i, nd := range plain.Nodes {
		var at *time.Time
		if len(nd.DependsOn) == 0 && runAt.After(slot) {
			at = &runAt
		}
		nd.Task = renderTask(nd.Task, p, d.Name, at)
		sd.DAG.Nodes[i] = nd
	}
	return s.cfg.DAGs.StartScheduled(cctx, d.HomeRegion, sd)
}

// renderTask renders the period into a node's task payload and sets its
// run_at (nil: none); a spec that does not decode is passed on as it is
// (the home region refuses it).
func renderTask(raw json.RawMessage, p apiv1.Period, name string, runAt *time.Time) json.RawMessage {
	if !bytes.Contains(raw, []byte("{{")) && runAt == nil {
		return raw
	}
	sp, err := task.DecodeSpec(raw)
	if err != nil {
		return raw
	}
	sp.Payload = period.Render(sp.Payload, p, name)
	sp.RunAt = runAt
	b, err := json.Marshal(sp)
	if err != nil {
		return raw
	}
	return b
}

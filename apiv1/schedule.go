package apiv1

import (
	"encoding/json"
	"time"

	"github.com/ax-sched/ax/task"
)

// Schedule is a cron schedule's definition (package schedule), as stored
// in the global etcd and returned by the API.
type Schedule struct {
	Name     string `json:"name"`
	Cron     string `json:"cron"`
	Timezone string `json:"timezone"`
	// Task is the spec each slot submits (as given, tenant applied,
	// normalized at each firing by the home region); nil when DAG is set.
	Task *task.Spec `json:"task"`
	// DAG is the run each slot starts instead (the body POST /v1/dags
	// takes, tenant applied); nil for a single-task schedule.
	DAG *DAGRequest `json:"dag,omitempty"`
	// DependsOnSchedules holds a single-task schedule's runs until other
	// schedules' runs allow them (a DAG's nodes say it themselves): each
	// slot then starts a one-node DAG run, named after the schedule, whose
	// node "task" is the spec.
	DependsOnSchedules []ScheduleDependency `json:"depends_on_schedules,omitempty"`
	HomeRegion         string               `json:"home_region"`
	Misfire            string               `json:"misfire"`
	// CatchUpLimit bounds a catch-up (misfire catch_up only).
	CatchUpLimit int           `json:"catch_up_limit,omitempty"`
	Overlap      string        `json:"overlap"`
	Jitter       task.Duration `json:"jitter,omitempty"`
	Paused       bool          `json:"paused"`
	CreatedAt    time.Time     `json:"created_at"`
	CreatedBy    string        `json:"created_by,omitempty"`
}

// ScheduleStatus is a schedule with what the federation leader has done
// with it (201 of POST /v1/schedules, 200 of GET /v1/schedules/{name}).
type ScheduleStatus struct {
	Schedule
	// LastSlot is the last slot handled: fired, or skipped by a policy.
	LastSlot    *time.Time `json:"last_slot,omitempty"`
	LastOutcome string     `json:"last_outcome,omitempty"`
	// LastFiredSlot is the last slot that has a task (LastTaskID).
	LastFiredSlot *time.Time `json:"last_fired_slot"`
	// LastTaskID is its task's id, or its DAG run's for a DAG schedule.
	LastTaskID string `json:"last_task_id,omitempty"`
	// LastPeriod is the logical period of LastFiredSlot.
	LastPeriod *Period `json:"last_period,omitempty"`
	// NextSlot is the next slot from now (null while paused).
	NextSlot *time.Time `json:"next_slot"`
}

// ScheduleList answers GET /v1/schedules.
type ScheduleList struct {
	Schedules []ScheduleStatus `json:"schedules"`
}

// ScheduleRequest is POST /v1/schedules. Jitter, task and dag stay raw so
// that their errors name the field. Exactly one of task and dag is given.
type ScheduleRequest struct {
	Name     string          `json:"name"`
	Cron     string          `json:"cron"`
	Timezone string          `json:"timezone"`
	Task     json.RawMessage `json:"task"`
	DAG      json.RawMessage `json:"dag"`
	// DependsOnSchedules: with task only (Schedule.DependsOnSchedules).
	DependsOnSchedules []ScheduleDependency `json:"depends_on_schedules"`
	HomeRegion         string               `json:"home_region"`
	Misfire            string               `json:"misfire"`
	CatchUpLimit       *int                 `json:"catch_up_limit"`
	Overlap            string               `json:"overlap"`
	Jitter             json.RawMessage      `json:"jitter"`
	Paused             bool                 `json:"paused"`
}

// ScheduleDeleted answers DELETE /v1/schedules/{name}.
type ScheduleDeleted struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

// ScheduleEnqueue is POST /v1/internal/enqueue: the federation leader hands
// a slot's task to the schedule's home region under the slot's derived id.
type ScheduleEnqueue struct {
	ID   string          `json:"id"`
	Spec json.RawMessage `json:"spec"`
}

// ScheduleEnqueueResponse answers it: 200 whether the id was created now
// or existed already.
type ScheduleEnqueueResponse struct {
	ID      string     `json:"id"`
	State   task.State `json:"state"`
	Created bool       `json:"created"`
}

// Period is a slot's logical period: from its slot to the schedule's next
// slot after it, in the schedule's time zone. A run processes the data of
// its period (Airflow's data interval, Dagster's partition).
type Period struct {
	Start time.Time `json:"period_start"`
	End   time.Time `json:"period_end"`
}

// ScheduledDAG is POST /v1/internal/dags: the federation leader starts a
// DAG schedule's run of one period in the schedule's home region under the
// run id derived from the slot.
type ScheduledDAG struct {
	ID       string     `json:"id"`
	Schedule string     `json:"schedule"`
	Period   Period     `json:"period"`
	DAG      DAGRequest `json:"dag"`
	// Gates are the resolved depends_on_schedules of each node, by node id
	// (the nodes' own depends_on_schedules are left out).
	Gates map[string][]task.Gate `json:"gates,omitempty"`
}

// ScheduleDependency is a dependency of a schedule's DAG node on another
// schedule of the same tenant.
type ScheduleDependency struct {
	Schedule string `json:"schedule"`
	// Rule is same_period (wait for the upstream's run whose period covers
	// this run's period start) or latest_success (its newest successful
	// run, ended within max_age, when the run starts; never waits).
	Rule   string        `json:"rule"`
	MaxAge task.Duration `json:"max_age,omitempty"` // latest_success only; 0: any age
	// Timeout bounds a same_period wait from the run's start (default
	// 24h); then the node fails with UPSTREAM_TIMEOUT, or is skipped.
	Timeout task.Duration `json:"timeout,omitempty"`
	// OnTimeout is fail (the default) or skip: what the node does when
	// the dependency cannot be met (timeout, or no recent success).
	OnTimeout string `json:"on_timeout,omitempty"`
}

// ScheduledDAGResponse answers it: 200 whether the run was created now or
// existed already, or Refused (the home region refuses the run itself:
// sending it again cannot help).
type ScheduledDAGResponse struct {
	ID      string `json:"id"`
	Created bool   `json:"created"`
	Refused *Error `json:"refused,omitempty"`
}

// BackfillRequest is POST /v1/schedules/{name}/backfill: start the runs of
// every slot s with from ≤ s ≤ to, oldest first, at most max_active at
// once. From and to are RFC 3339 times, or dates (2006-01-02: midnight in
// the schedule's time zone).
type BackfillRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	MaxActive int    `json:"max_active,omitempty"`
}

// RerunRequest is POST /v1/schedules/{name}/rerun: run one period again,
// under a new run id (the period's earlier run is left as it ended).
// Period is its start, a slot of the schedule (RFC 3339, or a date).
// Downstream reruns, too, the runs of the schedules that depend on it,
// transitively, for their periods that start within a rerun one: each such
// rerun's gates on a schedule rerun with it wait for that schedule's
// rerun of the period, not for an earlier success.
type RerunRequest struct {
	Period     string `json:"period"`
	Downstream bool   `json:"downstream,omitempty"`
}

// RerunRef names one rerun: its schedule and its id.
type RerunRef struct {
	Schedule string `json:"schedule"`
	ID       string `json:"id"`
}

// RerunWait is a run of an upstream schedule's rerun that a downstream
// rerun (RerunRequest.Downstream) waits for.
type RerunWait struct {
	Schedule string `json:"schedule"`
	Rerun    string `json:"rerun"` // the upstream's rerun's id
	Period   Period `json:"period"`
	RunID    string `json:"run_id"`        // a DAG run's id when DAG is set, else a task's
	DAG      bool   `json:"dag,omitempty"` // the upstream's slots start DAG runs
}

// Backfill states.
const (
	BackfillRunning  = "RUNNING"
	BackfillDone     = "DONE"
	BackfillCanceled = "CANCELED"
)

// Backfill is a backfill's (or a rerun's) progress: 201 of POST
// /v1/schedules/{name}/backfill and /rerun, and each of a schedule's
// Backfills.
type Backfill struct {
	ID        string    `json:"id"`
	Schedule  string    `json:"schedule"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	MaxActive int       `json:"max_active"`
	// Rerun is set on a rerun: its runs' ids differ from the period's
	// first run's.
	Rerun   bool   `json:"rerun,omitempty"`
	State   string `json:"state"`
	Periods int    `json:"periods"` // slots in [from, to]
	// Runs are the periods started so far, oldest first, with their run
	// (task or DAG run) ids and what starting them did.
	Runs       []BackfillRun `json:"runs"`
	Active     []string      `json:"active"` // ids started and not seen ended
	CreatedAt  time.Time     `json:"created_at"`
	CreatedBy  string        `json:"created_by,omitempty"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
	// CanceledBy names who cancelled it (state CANCELED).
	CanceledBy string `json:"canceled_by,omitempty"`
	// Downstream lists, on a rerun asked for with downstream, the reruns
	// it made of the schedules that depend on it, in dependency order.
	Downstream []RerunRef `json:"downstream,omitempty"`
	// WaitsFor lists, on such a downstream rerun, the upstream reruns'
	// runs its runs wait for: a run's gate on one of those schedules
	// opens only on that schedule's rerun of the period holding the
	// run's start.
	WaitsFor []RerunWait `json:"waits_for,omitempty"`
}

// BackfillRun is one period a backfill started.
type BackfillRun struct {
	Period  Period `json:"period"`
	ID      string `json:"id"`
	Outcome string `json:"outcome"` // a slot's outcome: fired, already_fired, rejected, budget_exceeded
	// WaitsFor are the upstream reruns' run ids this run's gates wait
	// for (a downstream rerun's run; Backfill.WaitsFor).
	WaitsFor []string `json:"waits_for,omitempty"`
}

// BackfillList answers GET /v1/schedules/{name}/backfills, newest first.
type BackfillList struct {
	Backfills []Backfill `json:"backfills"`
}

// ScheduleGrid answers GET /v1/schedules/{name}/grid: the schedule's
// latest periods (columns, oldest first) × its DAG's nodes (rows), each
// cell the node's state in the period's run (Airflow's grid view).
type ScheduleGrid struct {
	Schedule string `json:"schedule"`
	// Nodes are the DAG's node ids in definition order; "task" for a
	// schedule of one task.
	Nodes   []string     `json:"nodes"`
	Periods []GridPeriod `json:"periods"`
}

// GridPeriod is one period of a ScheduleGrid and its newest run (a rerun
// when there is one).
type GridPeriod struct {
	Period Period `json:"period"`
	// RunID is the run shown: a DAG run's id, or a task's for a schedule
	// of one task; "" when the period has no run (not fired yet, skipped,
	// paused, expired).
	RunID string `json:"run_id,omitempty"`
	// Runs counts the period's runs: its slot's and its reruns.
	Runs  int    `json:"runs"`
	State string `json:"state,omitempty"` // the run's (DAG or task) state
	// Cells are the nodes' states in that run, in Nodes' order.
	Cells []GridCell `json:"cells"`
}

// GridCell is one node in one period's run.
type GridCell struct {
	State  string `json:"state,omitempty"` // "" when the period has no run
	Reason string `json:"reason,omitempty"`
	TaskID string `json:"task_id,omitempty"` // the node's task, once it has one
}

// Bounds of GET /v1/schedules/{name}/grid's periods parameter.
const (
	GridPeriodsDefault = 12
	GridPeriodsMax     = 50
)

package apiv1

import (
	"encoding/json"
	"time"

	"github.com/ax-sched/ax/task"
)

// Schedule is a cron schedule's definition (package schedule), as stored
// in the global etcd and returned by the API.
type Schedule struct {
	Name       string     `json:"name"`
	Cron       string     `json:"cron"`
	Timezone   string     `json:"timezone"`
	Task       *task.Spec `json:"task"` // as given (tenant applied), normalized at each firing by the home region
	HomeRegion string     `json:"home_region"`
	Misfire    string     `json:"misfire"`
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
	LastTaskID    string     `json:"last_task_id,omitempty"`
	// NextSlot is the next slot from now (null while paused).
	NextSlot *time.Time `json:"next_slot"`
}

// ScheduleList answers GET /v1/schedules.
type ScheduleList struct {
	Schedules []ScheduleStatus `json:"schedules"`
}

// ScheduleRequest is POST /v1/schedules. Jitter and task stay raw so that
// their errors name the field.
type ScheduleRequest struct {
	Name         string          `json:"name"`
	Cron         string          `json:"cron"`
	Timezone     string          `json:"timezone"`
	Task         json.RawMessage `json:"task"`
	HomeRegion   string          `json:"home_region"`
	Misfire      string          `json:"misfire"`
	CatchUpLimit *int            `json:"catch_up_limit"`
	Overlap      string          `json:"overlap"`
	Jitter       json.RawMessage `json:"jitter"`
	Paused       bool            `json:"paused"`
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

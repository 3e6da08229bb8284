package apiv1

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/task"
)

// MaxDAGNodes bounds one DAG run.
const MaxDAGNodes = 1000

// DAGRequest is the body of POST /v1/dags. Each node's task spec goes
// under "task", as the body of POST /v1/tasks would (idempotency_key
// excepted: a node's task id is derived from the run).
type DAGRequest struct {
	Name   string `json:"name,omitempty"`
	Tenant string `json:"tenant,omitempty"` // from the token when it names one
	// Nodes in any order; at most MaxDAGNodes.
	Nodes []DAGNodeSpec `json:"nodes"`
}

// DAGNodeSpec is one node of a DAGRequest.
type DAGNodeSpec struct {
	ID          string           `json:"id"`
	DependsOn   []string         `json:"depends_on,omitempty"`
	TriggerRule task.TriggerRule `json:"trigger_rule,omitempty"` // default all_success
	Task        json.RawMessage  `json:"task"`
	// DependsOnSchedules holds the node until other schedules' runs allow
	// it: only in a schedule's DAG (POST /v1/schedules).
	DependsOnSchedules []ScheduleDependency `json:"depends_on_schedules,omitempty"`
}

// DAGStatus is a DAG run as the API shows it (201 of POST /v1/dags, 200 of
// GET /v1/dags/{id} and of POST /v1/dags/{id}/cancel).
type DAGStatus struct {
	ID         string        `json:"id"`
	Name       string        `json:"name,omitempty"`
	Tenant     string        `json:"tenant"`
	Region     string        `json:"region"` // home: where the run's state lives
	State      task.DAGState `json:"state"`
	CreatedAt  time.Time     `json:"created_at"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
	// CancelRequestedAt is set once POST /v1/dags/{id}/cancel reached the
	// run while it was RUNNING; the run ends CANCELED once every node settled.
	CancelRequestedAt *time.Time `json:"cancel_requested_at,omitempty"`
	CancelRequestedBy string     `json:"cancel_requested_by,omitempty"`
	// Schedule and Period are set on a run a schedule started: the
	// schedule's name and the slot's logical period.
	Schedule string          `json:"schedule,omitempty"`
	Period   *Period         `json:"period,omitempty"`
	Nodes    []DAGNodeStatus `json:"nodes"`
}

// DAGNodeStatus is one node of a DAGStatus.
type DAGNodeStatus struct {
	ID          string           `json:"id"`
	DependsOn   []string         `json:"depends_on,omitempty"`
	TriggerRule task.TriggerRule `json:"trigger_rule"`
	State       task.NodeState   `json:"state"`
	Reason      string           `json:"reason,omitempty"`
	// TaskID is the id the node's task has, or will have once released.
	// Nodes SKIPPED, CANCELED for an upstream failure, or CANCELED by a
	// cancel of the run while WAITING never get a task.
	TaskID    string     `json:"task_id"`
	TaskState task.State `json:"task_state,omitempty"`
	Region    string     `json:"region,omitempty"` // where its task runs or ran
	Pool      string     `json:"pool,omitempty"`
	Attempts  int        `json:"attempts,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	// Gates are the node's dependencies on other schedules' runs, as the
	// federation leader resolved them when it started the run.
	Gates []task.Gate `json:"gates,omitempty"`
}

// Query parameters of server-to-server calls, honoured only on calls with
// the cluster token.
const (
	// ParamOnBehalfOf carries the caller's name on a forwarded or fanned-out
	// action, so the trails of tasks acted on in other regions name the
	// operator, not "cluster".
	ParamOnBehalfOf = "on_behalf_of"
	// ParamForTenant carries the caller's tenant with a forwarded DAG
	// cancel: the home region then cancels only a run of that tenant.
	ParamForTenant = "for_tenant"
)

// DAGList answers GET /v1/dags: runs of every region (or region='s),
// newest first; pass NextCursor back as cursor= for the next page.
type DAGList struct {
	Runs        []DAGSummary    `json:"runs"`
	NextCursor  string          `json:"next_cursor,omitempty"`
	Regions     []RegionOutcome `json:"regions,omitempty"`
	Unavailable []string        `json:"unavailable,omitempty"`
}

// DAGSummary is one run of a DAGList: GET /v1/dags/{id} has its nodes.
type DAGSummary struct {
	ID         string        `json:"id"`
	Name       string        `json:"name,omitempty"`
	Tenant     string        `json:"tenant"`
	Region     string        `json:"region"` // home
	State      task.DAGState `json:"state"`
	CreatedAt  time.Time     `json:"created_at"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
	// Nodes counts the run's nodes by state (WAITING, RELEASED, SUCCESS, …).
	Nodes map[task.NodeState]int `json:"nodes"`
}

// DAGFilter is what GET /v1/dags selects: empty fields match every run.
type DAGFilter struct {
	Tenant string
	Name   string
	State  task.DAGState
	Cursor string // a NextCursor: runs older than it
	Limit  int
}

// Cursor is the run's mark in a listing, the time in its id (unix ms: the
// order runs are indexed in) and the id: as cursor=, "older than this run".
func (s DAGSummary) Cursor() string {
	p, _ := task.ParseID(s.ID)
	return strconv.FormatInt(p.Time.UnixMilli(), 10) + "." + s.ID
}

// ParseDAGCursor takes a DAGList cursor apart; false when it is not one.
func ParseDAGCursor(c string) (ms int64, id string, ok bool) {
	a, id, found := strings.Cut(c, ".")
	ms, err := strconv.ParseInt(a, 10, 64)
	if !found || err != nil || ms <= 0 || id == "" {
		return 0, "", false
	}
	return ms, id, true
}

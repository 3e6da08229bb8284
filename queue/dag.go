package queue

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
)

// ErrDAGNotFound: no DAG run with this id in this region (or it expired).
var ErrDAGNotFound = errors.New("queue: DAG run not found")

var NodeCodes = map[task.NodeState]string{
	task.NodeWaiting: "W", task.NodeReleased: "R", task.NodeSuccess: "S", task.NodeFailed: "F", task.NodeCanceled: "C", task.NodeSkipped: "K",
}

func nodeStateOf(code string) task.NodeState {
	for s, c := range NodeCodes {
		if c == code {
			return s
		}
	}
	return task.NodeState(code)
}

// DAGDef is a run's definition as stored: validated, with every node's task
// id derived (DAGTaskID). Task holds the node's task spec as submitted; it
// is normalized again when the node is released, so delays count from then.
type DAGDef struct {
	ID     string       `json:"id"`
	Name   string       `json:"name,omitempty"`
	Tenant string       `json:"tenant"`
	Nodes  []DAGNodeDef `json:"nodes"`
	// BacklogMax, when > 0, is the tenant's max_backlog the run was
	// admitted under: CreateDAG reserved room for every node's task in the
	// tenant's backlog (ReserveBacklog), its nodes' tasks take it
	// (NewTask.Reserved) and the run gives back what is left when it ends.
	BacklogMax int `json:"backlog_max,omitempty"`
	// Schedule and PeriodStart/PeriodEnd are set on a run a schedule
	// started: the schedule's name and the slot's logical period.
	Schedule    string     `json:"schedule,omitempty"`
	PeriodStart *time.Time `json:"period_start,omitempty"`
	PeriodEnd   *time.Time `json:"period_end,omitempty"`
}

// TaskIDs is the task id of every node.
func (d *DAGDef) TaskIDs() []string {
	ids := make([]string, len(d.Nodes))
	for i, n := range d.Nodes {
		ids[i] = n.TaskID
	}
	return ids
}

// DAGNodeDef is one node of a definition.
type DAGNodeDef struct {
	ID          string           `json:"id"`
	DependsOn   []string         `json:"depends_on,omitempty"`
	TriggerRule task.TriggerRule `json:"trigger_rule"`
	TaskID      string           `json:"task_id"`
	Task        json.RawMessage  `json:"task"`
	// Gates hold the node until other schedules' runs allow it (a
	// schedule's run only; package dag opens them).
	Gates []task.Gate `json:"gates,omitempty"`
}

// DAGNode is the recorded state of one node.
type DAGNode struct {
	State    task.NodeState
	Reason   string // e.g. UPSTREAM_FAILED, or the task's reason when it ended
	Attempts int    // attempts of its task when it ended
	Region   string // where its task ran (when it ended)
	Pool     string
	At       time.Time // of the last change (Redis time)
}

func (n DAGNode) Value() string {
	clean := func(s string) string { return strings.ReplaceAll(s, "|", "_") }
	return NodeCodes[n.State] + "|" + clean(n.Reason) + "|" + strconv.Itoa(n.Attempts) + "|" +
		clean(n.Region) + "|" + clean(n.Pool)
}

func DecodeDAGNode(v string) DAGNode {
	f := strings.SplitN(v, "|", 6)
	for len(f) < 6 {
		f = append(f, "")
	}
	n := DAGNode{State: nodeStateOf(f[0]), Reason: f[1], Attempts: record.Atoi(f[2]), Region: f[3], Pool: f[4]}
	if t := record.MsTime(f[5]); t != nil {
		n.At = *t
	}
	return n
}

// DAGRun is a run's state: the run and every node, without the definition.
type DAGRun struct {
	ID         string
	Name       string
	Tenant     string
	State      task.DAGState
	CreatedAt  time.Time
	FinishedAt *time.Time
	// CancelRequestedAt is set once a cancel was requested (CancelDAG) while
	// the run was RUNNING; CanceledBy names who asked.
	CancelRequestedAt *time.Time
	CanceledBy        string
	Nodes             map[string]DAGNode
}

// DAGStep is one node transition: From is the state the caller read.
type DAGStep struct {
	Node string
	From task.NodeState // task.NodeWaiting or task.NodeReleased
	To   DAGNode        // its time is set by Redis
}

// DAGUpdate is what UpdateDAG did.
type DAGUpdate struct {
	Applied  int           // steps applied (the others found the node moved on)
	Released int           // of those, WAITING → RELEASED
	State    task.DAGState // the run's state after the call
	Ended    bool          // this call ended the run
	// Canceling: a cancel was requested; no step released a node.
	Canceling bool
}

// DAGCancel is what CancelDAG did.
type DAGCancel struct {
	First    bool          // this call recorded the request (false: asked before, or the run had ended)
	Canceled int           // WAITING nodes this call moved to CANCELED
	State    task.DAGState // the run's state (RUNNING until the leader ends it)
	// RequestedAt is when the cancel was requested (Redis time), nil when
	// the run ended without one.
	RequestedAt *time.Time
}

// DAGTaskID derives the task id of a node: the run's id with its seq part
// replaced by 30 bits of a hash of (run id, node id, salt). Releasing a node
// twice thus submits the same id, which the store accepts once (ErrExists).
// Salt is 0 unless two nodes of one run collide; the definition records the
// result, so it is never derived again.
func DAGTaskID(dagID, node string, salt int) (string, error) {
	if _, err := task.ParseID(dagID); err != nil {
		return "", err
	}
	h := fnv.New64a()
	h.Write([]byte(dagID))
	h.Write([]byte{0})
	h.Write([]byte(node))
	if salt > 0 {
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(salt)))
	}
	return task.WithSeq(dagID, h.Sum64()), nil
}

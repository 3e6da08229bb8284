package task

// The states of DAG runs (package dag) and their nodes, and the rules that
// release a node: values every layer passes around, stored by queue.

// DAGState is the state of a DAG run.
type DAGState string

const (
	DAGRunning DAGState = "RUNNING"
	DAGSuccess DAGState = "SUCCESS" // every node SUCCESS or SKIPPED
	DAGFailed  DAGState = "FAILED"  // some node FAILED or CANCELED
	// DAGCanceled: a cancel was requested (dag.Runs.Cancel) before the run ended;
	// its nodes say what each did.
	DAGCanceled DAGState = "CANCELED"
)

// NodeState is the state of one node of a DAG run.
type NodeState string

const (
	NodeWaiting  NodeState = "WAITING"  // upstream not settled yet
	NodeReleased NodeState = "RELEASED" // its task was submitted
	NodeSuccess  NodeState = "SUCCESS"
	NodeFailed   NodeState = "FAILED"
	NodeCanceled NodeState = "CANCELED" // its task was canceled, or never submitted (UPSTREAM_FAILED, or CANCELED_BY_USER while WAITING)
	NodeSkipped  NodeState = "SKIPPED"  // its trigger rule can no longer hold
)

// Terminal reports whether the node is settled.
func (s NodeState) Terminal() bool {
	return s == NodeSuccess || s == NodeFailed || s == NodeCanceled || s == NodeSkipped
}

// TriggerRule says when a node runs, given its upstream nodes.
type TriggerRule string

const (
	AllSuccess TriggerRule = "all_success" // every upstream SUCCESS (the default)
	AllDone    TriggerRule = "all_done"    // every upstream settled, whatever the outcome
	OneFailed  TriggerRule = "one_failed"  // at least one upstream FAILED or CANCELED
)

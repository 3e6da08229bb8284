// Package dag runs DAGs, tasks with dependencies (docs/architecture.md §5), from their
// create to their end: each node's task is released once its upstreams settle by its trigger rule.
//
// Any server accepts a run; its region becomes the run's home, written into
// the run's id (the task id format). The definition and every node's state
// live in one slot of the home region's Redis (queue/dag.go). Each node's
// task id is derived from (run id, node id), so releasing a node twice
// submits the same id, which the store accepts once. A released task is
// submitted unplaced into the home region's store; the region leader places
// it like any due task — in any region, handed off through the outbox — so
// every node is placed on its own. The reconciler (Runs.Loop, a region
// leader loop) settles nodes and releases their dependents. A cancel
// (Runs.Cancel) stops a run: its waiting nodes are never released, its
// released nodes' tasks are cancelled.
//
// Boundary: dag → queue (the run's records, the Redis side), task, apiv1.
// It reaches tasks in other regions, and the other regions' servers,
// through Tasks, a small interface federation.Node implements; it never
// imports federation or httpapi. The HTTP API serves it through
// httpapi.DAGs, which *Runs implements; cmd/ax wires the two. Its counters
// (ax_dag_runs_total, ax_dag_nodes_released_total) go to the
// Config.Registerer it is given.
package dag

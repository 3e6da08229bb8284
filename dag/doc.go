// Package dag runs DAGs, tasks with dependencies (docs/dags.md), from their
// create to their end: each node's task is released once its upstreams
// settle by its trigger rule.
package dag

// Package dags serves /v1/dags: creating, reading, listing across regions and
// cancelling DAG runs, through the Runs interface *dag.Runs implements.
package dags

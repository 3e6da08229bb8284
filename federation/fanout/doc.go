// Package fanout follows a task across regions and asks every region for
// what spans the federation: a task's get, trail and actions wherever it
// is held, the merged listings of tasks and dead letters, bulk cancels and
// cost reports.
package fanout

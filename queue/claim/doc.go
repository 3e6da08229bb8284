// Package claim is a worker's side of a region's task store: claiming
// ready tasks, heartbeats, and recording each attempt's end (complete,
// fail, return, retry-after), with the wake-ups of idle claimers.
package claim

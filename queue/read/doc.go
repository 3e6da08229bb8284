// Package read answers reads of a region's stored tasks (trail, list,
// scan, dead letters, events, counts, costs, run times, limit states) and
// carries out a user's actions on them (cancel, replay, priority).
package read

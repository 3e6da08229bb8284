// Package bench is the load generator behind `ax bench`: it drives a
// region's task store and the worker runtime directly, as a worker process
// does, against a Redis it is given or a temporary redis-server it starts,
// and reports what it measured as a Summary (human text or JSON, with
// deltas against an earlier Summary). Its figures are measurements of one
// run, never assertions: its tests check that the counts add up.
package bench

// Package delayed is `ax bench delayed`: Run measures the leader's promotion
// of many tasks due at once, Cold (--cold) the cold tier's memory per task
// and its steady promotion of tasks due one after another.
package delayed

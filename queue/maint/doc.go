// Package maint is the region leader's side of the task store, every write
// fenced: promotion, placement, reaping, the sweep, preemption,
// re-placement, the cold tier's promotion, and the limits, fair shares,
// slow lanes and prices the leader publishes into the shards.
package maint

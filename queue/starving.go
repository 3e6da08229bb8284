package queue

import (
	"github.com/ax-sched/ax/task"
)

// Starving counts tasks that have waited longer than a threshold.
type Starving struct {
	// Ready[pool][priority]: READY tasks that became READY (or due) before
	// the threshold.
	Ready map[string][task.MaxPriority + 1]int
	// Unplaced: due tasks waiting for placement since before the threshold.
	Unplaced int
	// Tenants[pool][tenant]: its READY tasks of priorities 1–4 that became
	// READY before the threshold. In a pool with a fair share, from the
	// tenant sets (docs/fairness.md; an entry a claim has not yet dropped
	// since its task left READY another way still counts). In a pool
	// without, from the tenants of its oldest starving tasks, at most
	// tenantSample of them per shard: exact up to that many, past it those
	// counts scaled to the pool's starving total (the oldest are the
	// longest waits, which an operator looks for first).
	Tenants map[string]map[string]int
}

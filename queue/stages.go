package queue

// Claimer is a worker's side: claim, heartbeat, complete, fail and return,
// and the wake-ups of idle claimers.
type Claimer struct{ *Engine }

// Maintainer is the region leader's side, every write fenced: promotion,
// placement, reaping, the sweep, preemption, re-placement, the cold tier's
// promotion and the limits, fair shares, slow lanes and prices the leader
// publishes.
type Maintainer struct{ *Engine }

// HandOffs holds the records of tasks crossing regions: the outbox of
// tasks sent away, the tasks held for their sender's word, and drains.
type HandOffs struct{ *Engine }

// Tasks reads stored tasks (get, trail, list, scan, dead letters, events,
// counts, costs, run times, limit status) and carries out a user's actions
// on one (cancel, replay, priority).
type Tasks struct{ *Engine }

// DAGs stores DAG runs: their definitions, node states and indexes.
type DAGs struct{ *Engine }

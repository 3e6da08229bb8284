package claim

import (
	"sync"

	"github.com/ax-sched/ax/queue"
)

// Claimer is a worker's side: claim, heartbeat, complete, fail and return,
// and the wake-ups of idle claimers.
type Claimer struct {
	*queue.Engine
	// owed: with several shards, per pool the shard where a completion of
	// this claimer left a tenant with work waiting below its floor, and by
	// how many slots: the pool's next claims of that many start there
	// (ClaimTasks).
	owedMu sync.Mutex
	owed   map[string]owedFloor
}

type owedFloor struct{ shard, slots int }

// New returns the stage over e.
func New(e *queue.Engine) *Claimer { return &Claimer{Engine: e} }

package queue

// Store is a region's task store: the engine every stage shares and one
// type per stage of a task's journey, each taken by the caller that needs
// it. It is safe for concurrent use.
type Store struct {
	*engine
	submitter  *Submitter
	claimer    *Claimer
	maintainer *Maintainer
	handOffs   *HandOffs
	tasks      *Tasks
	dags       *DAGs
}

func newStore(e *engine) *Store {
	return &Store{engine: e, submitter: &Submitter{e}, claimer: &Claimer{e}, maintainer: &Maintainer{e},
		handOffs: &HandOffs{e}, tasks: &Tasks{e}, dags: &DAGs{e}}
}

// Submitter accepts new tasks: the submit script, the cold tier's submit,
// the tenants' submit quotas and backlog room.
type Submitter struct{ *engine }

// Claimer is a worker's side: claim, heartbeat, complete, fail and return,
// and the wake-ups of idle claimers.
type Claimer struct{ *engine }

// Maintainer is the region leader's side, every write fenced: promotion,
// placement, reaping, the sweep, preemption, re-placement, the cold tier's
// promotion and the limits, fair shares, slow lanes and prices the leader
// publishes.
type Maintainer struct{ *engine }

// HandOffs holds the records of tasks crossing regions: the outbox of
// tasks sent away, the tasks held for their sender's word, and drains.
type HandOffs struct{ *engine }

// Tasks reads stored tasks (get, trail, list, scan, dead letters, events,
// counts, costs, run times, limit status) and carries out a user's actions
// on one (cancel, replay, priority).
type Tasks struct{ *engine }

// DAGs stores DAG runs: their definitions, node states and indexes.
type DAGs struct{ *engine }

// Submitter is the store's submitting stage.
func (s *Store) Submitter() *Submitter { return s.submitter }

// Claimer is the store's claiming stage.
func (s *Store) Claimer() *Claimer { return s.claimer }

// Maintainer is the store's leader stage.
func (s *Store) Maintainer() *Maintainer { return s.maintainer }

// HandOffs is the store's hand-off records.
func (s *Store) HandOffs() *HandOffs { return s.handOffs }

// Tasks is the store's reads and user actions.
func (s *Store) Tasks() *Tasks { return s.tasks }

// DAGs is the store's DAG runs.
func (s *Store) DAGs() *DAGs { return s.dags }

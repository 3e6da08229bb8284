package store

import (
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/batchstore"
	"github.com/ax-sched/ax/queue/claim"
	"github.com/ax-sched/ax/queue/dagstore"
	"github.com/ax-sched/ax/queue/handoffs"
	"github.com/ax-sched/ax/queue/maint"
	"github.com/ax-sched/ax/queue/read"
	"github.com/ax-sched/ax/queue/submit"
	"github.com/redis/go-redis/v9"
)

// Store is a region's task store: the engine every stage shares and one
// type per stage of a task's journey, each taken by the caller that needs
// it. It is safe for concurrent use.
type Store struct {
	*queue.Engine
	submitter  *submit.Submitter
	claimer    *claim.Claimer
	maintainer *maint.Maintainer
	handOffs   *handoffs.HandOffs
	tasks      *read.Tasks
	dags       *dagstore.DAGs
	batches    *batchstore.Batches
}

// New returns a Store over rdb.
func New(rdb redis.UniversalClient, opts queue.Options) (*Store, error) {
	e, err := queue.NewEngine(rdb, opts)
	if err != nil {
		return nil, err
	}
	return newStore(e), nil
}

func newStore(e *queue.Engine) *Store {
	return &Store{Engine: e, submitter: submit.New(e), claimer: claim.New(e), maintainer: maint.New(e),
		handOffs: handoffs.New(e), tasks: read.New(e), dags: dagstore.New(e), batches: batchstore.New(e)}
}

// Submitter is the store's submitting stage.
func (s *Store) Submitter() *submit.Submitter { return s.submitter }

// Claimer is the store's claiming stage.
func (s *Store) Claimer() *claim.Claimer { return s.claimer }

// Maintainer is the store's leader stage.
func (s *Store) Maintainer() *maint.Maintainer { return s.maintainer }

// HandOffs is the store's hand-off records.
func (s *Store) HandOffs() *handoffs.HandOffs { return s.handOffs }

// Tasks is the store's reads and user actions.
func (s *Store) Tasks() *read.Tasks { return s.tasks }

// DAGs is the store's DAG runs.
func (s *Store) DAGs() *dagstore.DAGs { return s.dags }

// Batches is the store's batches.
func (s *Store) Batches() *batchstore.Batches { return s.batches }

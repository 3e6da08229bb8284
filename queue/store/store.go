package store

import (
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/submit"
	"github.com/redis/go-redis/v9"
)

// Store is a region's task store: the engine every stage shares and one
// type per stage of a task's journey, each taken by the caller that needs
// it. It is safe for concurrent use.
type Store struct {
	*queue.Engine
	submitter  *submit.Submitter
	claimer    *queue.Claimer
	maintainer *queue.Maintainer
	handOffs   *queue.HandOffs
	tasks      *queue.Tasks
	dags       *queue.DAGs
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
	return &Store{Engine: e, submitter: submit.New(e), claimer: &queue.Claimer{Engine: e}, maintainer: &queue.Maintainer{Engine: e},
		handOffs: &queue.HandOffs{Engine: e}, tasks: &queue.Tasks{Engine: e}, dags: &queue.DAGs{Engine: e}}
}

// Submitter is the store's submitting stage.
func (s *Store) Submitter() *submit.Submitter { return s.submitter }

// Claimer is the store's claiming stage.
func (s *Store) Claimer() *queue.Claimer { return s.claimer }

// Maintainer is the store's leader stage.
func (s *Store) Maintainer() *queue.Maintainer { return s.maintainer }

// HandOffs is the store's hand-off records.
func (s *Store) HandOffs() *queue.HandOffs { return s.handOffs }

// Tasks is the store's reads and user actions.
func (s *Store) Tasks() *queue.Tasks { return s.tasks }

// DAGs is the store's DAG runs.
func (s *Store) DAGs() *queue.DAGs { return s.dags }

package batch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue/batchstore"
	"github.com/ax-sched/ax/task"
)

// ErrNotFound: no such batch (or another tenant's): the API's 404.
var ErrNotFound = &apiv1.Error{Code: apiv1.CodeNotFound, Message: "no such batch", Field: "id"}

// apiErr is err with the store's not-found as ErrNotFound.
func apiErr(err error) error {
	if errors.Is(err, batchstore.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Tasks is what batches need of the federation; federation.Node
// implements it.
type Tasks interface {
	// Enqueue stores sp under the fixed id in region home, unplaced;
	// created is false when the id is held already, refused says why the
	// task itself was refused (sending again cannot change it).
	Enqueue(ctx context.Context, home, id string, sp *task.Spec) (created bool, refused, err error)
	// CancelTask asks the task id to stop wherever it is held, as by; a
	// task missing or ended already is not an error.
	CancelTask(ctx context.Context, id, by string) error
	// Proxy sends one request to the API of another region's server and
	// decodes its answer into out; an error answer is the peer's error.
	Proxy(ctx context.Context, region, method, path string, in, out any) error
}

// SubmitFunc submits members (each carrying its batch's id) through the
// submit pipeline within the caller's quota: per spec, in order, its id
// or why it was refused (ids[i] is "" then); err is the whole call's
// (nothing stored).
type SubmitFunc = func(ctx context.Context, specs []*task.Spec) (ids []string, refused []error, err error)

// Config configures the batches of one server.
type Config struct {
	Region string // this server's region: the home of the batches it accepts
	// Regions are the federation's regions: a callback naming another is
	// refused (nil: not checked).
	Regions []string
	// Defaults are the task defaults specs are normalized with.
	Defaults task.Defaults
	// Retain is how long a completed batch is kept (default 24 h).
	Retain time.Duration
	// RunEnded records the end of a single-task schedule's run (a task
	// whose Spec.ScheduleEnd is set) for the gates waiting for it
	// (schedule/ends.Log.RunEnded); nil: such ends are dropped, and the
	// gates read them on their own.
	RunEnded func(ctx context.Context, tenant, schedule string, period time.Time, id string, state task.DAGState) error
	Logger   *slog.Logger
	Now      func() time.Time
}

// RetainDefault is Config.Retain's default.
const RetainDefault = 24 * time.Hour

// Batches are the batches of one server: the API creates, reads and
// cancels them through it; Reporter and Recover are its region leader loop.
//
// Any server accepts a batch; its region becomes the batch's home, written
// into the batch's id (the task id format), and the batch's counts live in
// the home region's Redis. Its members are submitted through the ordinary
// submit pipeline carrying the batch's id, so each runs wherever it is
// placed. Fan-in is counted by the scripts that end the members: the
// script that moves a member to SUCCESS, FAILED or CANCELED, in whichever
// region, queues its end on its shard's list in the same step; each
// region's leader reports those lists to the batches' home regions
// (Reporter), whose script counts each member once and completes the batch
// with its last member, setting its callback due in that same step. The
// callback's task has an id derived from the batch's, so storing it twice
// stores it once: the server that completed the batch stores it at once,
// and the home region's leader stores any callback still due (a server
// killed in between). It reaches the federation through Tasks.
type Batches struct {
	store *batchstore.Batches
	tasks Tasks
	cfg   Config
	log   *slog.Logger
}

// New prepares the batches kept in store, the region's, whose members and
// callbacks go through tasks.
func New(store *batchstore.Batches, tasks Tasks, cfg Config) *Batches {
	if cfg.Defaults == (task.Defaults{}) {
		cfg.Defaults = task.DefaultDefaults()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retain <= 0 {
		cfg.Retain = RetainDefault
	}
	return &Batches{store: store, tasks: tasks, cfg: cfg, log: cfg.Logger}
}

// homeOf is the home region of batch id.
func homeOf(id string) (string, error) {
	p, err := task.ParseID(id)
	if err != nil {
		return "", ErrNotFound
	}
	return p.Region, nil
}

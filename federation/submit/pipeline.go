package submit

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/pick"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/submit"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/trace"
)

// Config of a server's submit pipeline.
type Config struct {
	Region   string   // this server's region
	Regions  []string // every region of the federation (rendezvous hashing of keys)
	Defaults task.Defaults
	// SaturatedRetryAfter is the Retry-After of a 429.
	SaturatedRetryAfter time.Duration
	// Backlog is a tenant's max_backlog in this region (docs/security.md):
	// the most unfinished tasks its submits may leave here, checked
	// atomically by the store (queue.NewTask.BacklogMax); 0 or a nil func:
	// none.
	Backlog func(tenant string) int
	// BacklogBytes is a tenant's max_backlog_bytes in this region, checked
	// by the store as Backlog is (queue.NewTask.BacklogBytesMax); 0 or a
	// nil func: none.
	BacklogBytes func(tenant string) int64
	// MemoryAdmit is the region's memory reserve for schedule slots
	// (EnqueueFixed): its refusal is returned as it is, an error to try
	// again later (federation.Config.MemoryAdmit); nil: none.
	MemoryAdmit    func(ctx context.Context, tenant string, bytes int) error
	TracerProvider trace.TracerProvider
	Now            func() time.Time

	Store   Store
	View    *view.View
	Flights *view.Flights
	Picker  *pick.Picker
	Peer    *peer.Client
	Budgets *budget.Book
	Metrics *metrics.Metrics
	// Wake tells the region's leader that tasks arrived; nil: nobody.
	Wake func()
	// Locate finds a task wherever it lives (a unique key's holder handed
	// off to another region); nil: such a holder holds its key until its
	// unique_for ends.
	Locate func(ctx context.Context, id string) (*task.Task, error)
	// Sends reports whether this server sends the region's hand-offs now
	// (it leads the region's cell); nil: it does. A hand-off placed by a
	// server that does not send it is counted in flight until it leaves
	// the region's outbox (Flights.Await), as it never sees it land.
	Sends func() bool
}

// Store is what the pipeline needs of this region's store: the store
// step's submit (taking the request's quota with its first tasks), the
// quota buckets of DAGs and schedules, and the reads that answer a repeated
// submit and a backlog's room.
type Store interface {
	// TakeQuota takes count submits from tenant's bucket (perSecond refill,
	// burst size); not ok, wait is how long until they would fit.
	TakeQuota(ctx context.Context, tenant string, perSecond float64, burst, count int) (ok bool, wait time.Duration, err error)
	// Submit stores tasks, each admitted or refused on its own.
	Submit(ctx context.Context, tasks ...queue.NewTask) ([]queue.SubmitResult, error)
	// SubmitWithin is Submit after taking q from its bucket; refused or
	// failed there (a *queue.QuotaError), it stores nothing.
	SubmitWithin(ctx context.Context, q queue.Quota, tasks ...queue.NewTask) ([]queue.SubmitResult, error)
	// Get reads a task of this region.
	Get(ctx context.Context, id string) (*task.Task, error)
	// Backlog counts tenant's unfinished tasks in this region.
	Backlog(ctx context.Context, tenant string) (int, error)
}

var _ Store = (*submit.Submitter)(nil)

// Pipeline takes submitted tasks from the API to this region's store or
// another region: validate, budget, key home, backlog, place, store (with
// spill), forward. It also stores the tasks of schedules and DAG runs
// under their fixed ids.
type Pipeline struct {
	cfg    Config
	tracer trace.Tracer
}

// New is the pipeline of cfg.
func New(cfg Config) *Pipeline {
	return &Pipeline{cfg: cfg, tracer: tracing.Tracer(cfg.TracerProvider)}
}

// sends reports whether this server's outbox sends the hand-offs it places.
func (n *Pipeline) sends() bool { return n.cfg.Sends == nil || n.cfg.Sends() }

func (n *Pipeline) wake() {
	if n.cfg.Wake != nil {
		n.cfg.Wake()
	}
}

// backlogMax is sp's tenant's max_backlog (0: none).
func (n *Pipeline) backlogMax(sp *task.Spec) int { return n.backlogMaxOf(sp.Tenant) }

// backlogBytesMax is sp's tenant's max_backlog_bytes (0: none).
func (n *Pipeline) backlogBytesMax(sp *task.Spec) int64 {
	if n.cfg.BacklogBytes == nil {
		return 0
	}
	return n.cfg.BacklogBytes(sp.Tenant)
}

func (n *Pipeline) backlogMaxOf(tenant string) int {
	if n.cfg.Backlog == nil {
		return 0
	}
	return n.cfg.Backlog(tenant)
}

// BacklogRoom refuses count more tasks of tenant (a DAG's nodes, a
// schedule's next slot) with a *QuotaError when this region's backlog
// would pass the tenant's max_backlog. It reads the count: unlike a
// submit's check it is not atomic with the tasks it admits, which are
// released later and counted then, never refused.
func (n *Pipeline) BacklogRoom(ctx context.Context, tenant string, count int) error {
	max := n.backlogMaxOf(tenant)
	if max <= 0 {
		return nil
	}
	have, err := n.cfg.Store.Backlog(ctx, tenant)
	if err != nil {
		return err
	}
	if have+count > max {
		n.cfg.Metrics.Rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
		return &QuotaError{Field: "max_backlog", Tenant: tenant, Max: max, Have: have, Asked: count}
	}
	return nil
}

// KeyHome is the home region of an idempotency key: rendezvous hashing of
// tenant+key over the configured regions, so every server agrees without
// talking and only 1/N of keys move when a region is added.
func (n *Pipeline) KeyHome(tenant, key string) string {
	best, bestScore := "", uint64(0)
	for _, r := range n.cfg.Regions {
		h := fnv.New64a()
		h.Write([]byte(tenant))
		h.Write([]byte{0})
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(r))
		if s := h.Sum64(); best == "" || s > bestScore {
			best, bestScore = r, s
		}
	}
	return best
}

// Explain is a dry-run placement of a spec.
func (n *Pipeline) Explain(sp *task.Spec) (placement.Explanation, error) {
	if err := sp.Normalize(n.cfg.Defaults, n.cfg.Now()); err != nil {
		return placement.Explanation{}, err
	}
	// As Submit: a region outside the federation is the client's typo
	// (400 naming regions[i]), not "no pool matches" (UNPLACEABLE).
	if err := n.cfg.Peer.KnownRegions(sp.Regions); err != nil {
		return placement.Explanation{}, err
	}
	return n.cfg.Picker.Explain(n.cfg.View.Pools(), sp, n.cfg.Now()), nil
}

// BudgetFits refuses sp, a task of a new DAG run or schedule, when its
// tenant is past a cap budget and that cap is why no pool matches it: the
// *PlacementError (422 unplaceable, with the explanation) a submit of it
// gets. A task no pool matches even uncapped, or one whose pools under the
// cap are full, is not the budget's to refuse: it waits to be placed when
// due, as any task of an admitted DAG or schedule does.
func (n *Pipeline) BudgetFits(sp *task.Spec) error {
	st, ok := n.cfg.Budgets.Of(sp.Tenant)
	if !ok || !st.Over || st.Refuse {
		return nil
	}
	c := *sp
	c.RunAt, c.Delay = nil, 0
	if err := c.Normalize(n.cfg.Defaults, n.cfg.Now()); err != nil {
		return nil // refused elsewhere, naming its field
	}
	n.cfg.Budgets.Cap(&c)
	now, snap := n.cfg.Now(), n.cfg.View.Pools()
	if d := n.cfg.Picker.ExplainTask(snap, n.cfg.Picker.Task(&c, now), 0, now).Decision; !d.OK && !d.AllSaturated() {
		return nil
	}
	if ex := n.cfg.Picker.Explain(snap, &c, now); !ex.Decision.OK && !ex.Decision.AllSaturated() {
		return &PlacementError{Explanation: ex}
	}
	return nil
}

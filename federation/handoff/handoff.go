package handoff

import (
	"context"
	"log/slog"
	"time"

	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/pick"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/trace"
)

// Config of a server's hand-off services. Durations must be set (the
// federation's Config holds their defaults).
type Config struct {
	Region   string   // this server's region
	Regions  []string // every region of the federation (config regions:)
	Defaults task.Defaults
	// HandOffHorizon is how long a hand-off that may have reached its
	// target waits for the target's answer while the target is unreachable
	// before it is placed again (HANDOFF_REVOKED); the target drops any copy
	// it holds (held.go).
	HandOffHorizon time.Duration
	// StuckPoolGrace is how long a pool may hold READY tasks without a live
	// worker before they are re-placed elsewhere.
	StuckPoolGrace time.Duration
	// ReplaceOnPriceRise: a local pool whose live price reaches this
	// multiple of its configured price has its READY tasks re-placed
	// (ReplaceLoop); 0: only when its capacity window closes.
	ReplaceOnPriceRise float64
	// Backlog is a tenant's max_backlog in this region; nil: none.
	Backlog func(tenant string) int
	// BacklogBytes is a tenant's max_backlog_bytes in this region; nil: none.
	BacklogBytes func(tenant string) int64
	// MemoryAdmit is the region's memory reserve for hand-offs received:
	// a hand-off it refuses is answered with its refusal (429 or 503), so
	// the sender keeps the task and sends it again later
	// (federation.Config.MemoryAdmit); nil: none.
	MemoryAdmit    func(ctx context.Context, tenant string, bytes int) error
	TracerProvider trace.TracerProvider
	Now            func() time.Time

	Store   *store.Store
	Cell    *region.Cell // nil: a server that places nothing (tests)
	View    *view.View
	Flights *view.Flights
	Picker  *pick.Picker
	Peer    *peer.Client
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// env is what every hand-off service reads.
type env struct {
	cfg     Config
	store   *store.Store
	cell    *region.Cell
	view    *view.View
	flights *view.Flights
	picker  *pick.Picker
	peer    *peer.Client
	metrics *metrics.Metrics
	log     *slog.Logger
	tracer  trace.Tracer
}

func newEnv(cfg Config) *env {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &env{cfg: cfg, store: cfg.Store, cell: cfg.Cell, view: cfg.View, flights: cfg.Flights, picker: cfg.Picker,
		peer: cfg.Peer, metrics: cfg.Metrics, log: cfg.Logger, tracer: tracing.Tracer(cfg.TracerProvider)}
}

// Sender moves the tasks placed in other regions to them (OutboxLoop).
type Sender struct {
	*env
	kick chan struct{} // Wake
}

// NewSender is the hand-off sender of cfg.
func NewSender(cfg Config) *Sender { return &Sender{env: newEnv(cfg), kick: make(chan struct{}, 1)} }

// Receiver takes the tasks other regions hand to this one, holds them
// until the sender's word, and answers senders about their hand-offs.
type Receiver struct{ *env }

// NewReceiver is the hand-off receiver of cfg.
func NewReceiver(cfg Config) *Receiver { return &Receiver{newEnv(cfg)} }

// Mover re-places READY tasks elsewhere: an operator's drain, pools without
// workers, pools whose price rose or whose window closed.
type Mover struct{ *env }

// NewMover is the re-placement of cfg.
func NewMover(cfg Config) *Mover { return &Mover{newEnv(cfg)} }

// wake tells the region's cell that tasks arrived, so its leader places
// them now rather than at its next pass.
func (n *env) wake() {
	if n.cell != nil {
		n.cell.Wake()
	}
}

// backlogBytesMax is sp's tenant's max_backlog_bytes here (0: none).
func (n *env) backlogBytesMax(sp *task.Spec) int64 {
	if n.cfg.BacklogBytes == nil {
		return 0
	}
	return n.cfg.BacklogBytes(sp.Tenant)
}

// backlogMax is sp's tenant's max_backlog here (0: none).
func (n *env) backlogMax(sp *task.Spec) int {
	if n.cfg.Backlog == nil {
		return 0
	}
	return n.cfg.Backlog(sp.Tenant)
}

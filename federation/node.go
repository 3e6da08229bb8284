package federation

import (
	"cmp"
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/federation/handoff"
	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/pick"
	"github.com/ax-sched/ax/federation/submit"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
	"go.opentelemetry.io/otel/trace"
)

// Config of a federation node (one per ax server).
type Config struct {
	Region  string   // this server's region
	Regions []string // every region of the federation (rendezvous hashing of keys)
	// ClusterToken authenticates server-to-server calls (hand-off, forwarding).
	ClusterToken string
	// PeerTLS is the client side TLS of calls to https peers (their CA,
	// this server's certificate for mutual TLS); nil: the system roots.
	PeerTLS *tls.Config
	// AllowInsecurePeers lets the cluster token go to a plain-http peer off
	// the loopback interface; without it such a call is refused unsent.
	AllowInsecurePeers bool
	Defaults           task.Defaults
	Placement          placement.Config
	// NoCapacityRetry is how long a task that no pool can take now waits
	// before it is placed again (first try; it doubles up to 1 min).
	NoCapacityRetry time.Duration
	// SaturatedRetryAfter is the Retry-After of a 429.
	SaturatedRetryAfter time.Duration
	// StuckPoolGrace is how long a pool may hold READY tasks without a live
	// worker before they are re-placed elsewhere.
	StuckPoolGrace time.Duration
	// HandOffHorizon is how long a hand-off that may have reached its
	// target waits for the target's answer while the target is unreachable
	// before it is placed again (HANDOFF_REVOKED); the target drops any copy
	// it holds (package handoff).
	HandOffHorizon time.Duration
	// ReplaceOnPriceRise: a local pool whose live price reaches this
	// multiple of its configured price has its READY tasks re-placed
	// (ReplaceLoop); 0: only when its capacity window closes.
	ReplaceOnPriceRise float64
	// TracerProvider receives the spans of the tasks the node submits,
	// hands off and receives (internal/tracing); nil records none.
	TracerProvider trace.TracerProvider
	// Logger carries the server's identity (cmd/ax adds its region); the
	// node adds none, so no key appears twice. Other regions are "peer".
	Logger *slog.Logger
	// Backlog is a tenant's max_backlog in this region (docs/security.md):
	// the most unfinished tasks its submits and the hand-offs it receives
	// may leave here, checked atomically by the store
	// (queue.NewTask.BacklogMax; a hand-off past it is refused
	// definitely); 0 or a nil func: none. Schedule slots (EnqueueFixed)
	// are checked the same way (a slot past it is refused); DAG nodes are
	// counted, not refused: their DAG reserved room for them.
	Backlog func(tenant string) int
	// BacklogBytes is a tenant's max_backlog_bytes in this region: the
	// most payload bytes its unfinished tasks may hold here, checked as
	// Backlog is (queue.NewTask.BacklogBytesMax); 0 or a nil func: none.
	BacklogBytes func(tenant string) int64
	// MemoryAdmit is the region's Redis memory reserve (quotas.memory_reserve,
	// the API's endpoint.Reserve.Admit): it refuses a new task of tenant
	// with a payload of bytes while Redis is in the reserve. Schedule slots
	// (EnqueueFixed) and hand-offs received ask it as API submits do, and
	// its refusal (429 or 503) is one to try again later: the slot is
	// retried until its misfire policy decides, the hand-off stays with
	// its sender. nil: none.
	MemoryAdmit func(ctx context.Context, tenant string, bytes int) error
	// Budgets are the tenants' monthly budgets (package budget), by tenant;
	// nil: none. Node.SetBudgets replaces them.
	Budgets map[string]budget.Budget
	// BudgetRefresh is how often BudgetLoop rereads the spend.
	BudgetRefresh time.Duration
	// BudgetShares holds the regions' shares of each refuse budget (the
	// global etcd, under SharesPrefix): with it, a task of a tenant with
	// a refuse budget reserves its expected cost in this region's share
	// atomically at admission, and SharesLoop rebalances the shares
	// (budget.Book.SharesLoop); nil: no reservations.
	BudgetShares budget.Shares
	SharesPrefix string
	// Now is the node's one clock: placement, in-flight accounting, stuck
	// pools (tests inject one); nil is time.Now. The view keeps the wall
	// clock: it judges figures other servers stamped with theirs.
	Now func() time.Time
}

// The defaults of Config's durations (a zero or negative value takes them).
const (
	NoCapacityRetryDefault     = 2 * time.Second
	SaturatedRetryAfterDefault = 5 * time.Second
	StuckPoolGraceDefault      = 30 * time.Second
	HandOffHorizonDefault      = 30 * time.Second
	// BudgetRefreshDefault: a fan-out to every region, cheap next to the
	// minutes a budget moves in.
	BudgetRefreshDefault = 30 * time.Second
)

// Node is the federation logic of one server, assembled from its parts:
// each part's methods are the node's, and a caller that needs one job may
// take the part alone.
type Node struct {
	*submit.Pipeline  // Submit, Explain, KeyHome, BacklogRoom, BudgetFits, Enqueue…
	*handoff.Sender   // OutboxLoop
	*handoff.Receiver // Accept, AcceptMany, Commit, HandOffWord, HeldLoop
	*handoff.Mover    // Drain, StuckPoolLoop, ReplaceLoop
	*fanout.Reader    // Get, Trail, Act, Tasks, DeadLetters, BulkCancel, Cost…

	cfg     Config
	store   *store.Store
	view    *view.View
	est     *placement.Estimator
	peer    *peer.Client
	picker  *pick.Picker
	budgets *budget.Book
	flights *view.Flights
}

// NewNode ties a region's store and cell to the global view. The node is
// the cell's placer and runs leader loops beside it (cmd/ax passes them to
// cell.Run); it wakes the cell after submits and reads its figures. cell
// may be nil for a node that places nothing (tests drive its loops).
func NewNode(cfg Config, store *store.Store, v *view.View, cell *region.Cell, m *metrics.Metrics) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.NoCapacityRetry = cmp.Or(max(cfg.NoCapacityRetry, 0), NoCapacityRetryDefault)
	cfg.HandOffHorizon = cmp.Or(max(cfg.HandOffHorizon, 0), HandOffHorizonDefault)
	cfg.StuckPoolGrace = cmp.Or(max(cfg.StuckPoolGrace, 0), StuckPoolGraceDefault)
	cfg.SaturatedRetryAfter = cmp.Or(max(cfg.SaturatedRetryAfter, 0), SaturatedRetryAfterDefault)
	cfg.BudgetRefresh = cmp.Or(max(cfg.BudgetRefresh, 0), BudgetRefreshDefault)
	if len(cfg.Regions) == 0 {
		cfg.Regions = []string{cfg.Region}
	}
	if cfg.Defaults == (task.Defaults{}) {
		cfg.Defaults = task.DefaultDefaults()
	}
	est, err := placement.NewEstimator(cfg.Placement)
	if err != nil {
		return nil, err
	}
	pl, err := placement.NewPlacer(cfg.Placement, est)
	if err != nil {
		return nil, err
	}
	if m == nil {
		m = metrics.New(nil)
	}
	var pools []string
	if cell != nil {
		pools = cell.PoolNames()
	}
	m.Init(cfg.Region, pools)
	// A placement not seen landing after this long is no longer counted
	// (its target is down, or another server of the region sends it).
	flights := view.NewFlights(max(2*cfg.Placement.StaleAfter, 30*time.Second))
	n := &Node{cfg: cfg, store: store, view: v, est: est, flights: flights}
	// A submit wakes the cell's leader (due tasks to place) and this
	// server's outbox loop (tasks placed elsewhere), when it leads.
	wake := func() {
		if cell != nil {
			cell.Wake()
		}
		n.Sender.Wake()
	}
	var sends func() bool
	if cell != nil {
		sends = cell.Leading
	}
	n.peer = peer.New(peer.Config{Region: cfg.Region, Regions: cfg.Regions, Token: cfg.ClusterToken, TLS: cfg.PeerTLS,
		AllowInsecure: cfg.AllowInsecurePeers, View: v, Metrics: m, Logger: cfg.Logger})
	n.picker = pick.New(pick.Config{Region: cfg.Region, Regions: cfg.Regions, Placement: cfg.Placement,
		NoCapacityRetry: cfg.NoCapacityRetry, View: v, Flights: flights, Metrics: m, Now: cfg.Now}, pl)
	n.Reader = fanout.New(fanout.Config{Region: cfg.Region, Regions: cfg.Regions, Store: store.Tasks(), Peer: n.peer, View: v,
		Logger: cfg.Logger, Wake: wake})
	bc := budget.Config{Region: cfg.Region, Budgets: cfg.Budgets, Refresh: cfg.BudgetRefresh, Metrics: m,
		Logger: cfg.Logger, Now: cfg.Now, Regions: cfg.Regions, Shares: cfg.BudgetShares, SharesPrefix: cfg.SharesPrefix}
	if cfg.BudgetShares != nil && store != nil {
		bc.Ledgers = store.Maintainer()
	}
	n.budgets = budget.New(bc, n.Reader)
	n.Pipeline = submit.New(submit.Config{Region: cfg.Region, Regions: cfg.Regions, Defaults: cfg.Defaults,
		SaturatedRetryAfter: cfg.SaturatedRetryAfter, Backlog: cfg.Backlog, BacklogBytes: cfg.BacklogBytes, MemoryAdmit: cfg.MemoryAdmit, TracerProvider: cfg.TracerProvider, Now: cfg.Now,
		Store: store.Submitter(), View: v, Flights: flights, Picker: n.picker, Peer: n.peer, Budgets: n.budgets, Metrics: m, Wake: wake,
		Sends: sends, Locate: func(ctx context.Context, id string) (*task.Task, error) { return n.Reader.Get(ctx, id, 0) }})
	hc := handoff.Config{Region: cfg.Region, Regions: cfg.Regions, Defaults: cfg.Defaults, HandOffHorizon: cfg.HandOffHorizon,
		StuckPoolGrace: cfg.StuckPoolGrace, ReplaceOnPriceRise: cfg.ReplaceOnPriceRise, Backlog: cfg.Backlog, BacklogBytes: cfg.BacklogBytes,
		MemoryAdmit: cfg.MemoryAdmit, TracerProvider: cfg.TracerProvider, Now: cfg.Now, Store: store, Cell: cell, View: v, Flights: flights,
		Picker: n.picker, Peer: n.peer, Metrics: m, Logger: cfg.Logger}
	n.Sender, n.Receiver, n.Mover = handoff.NewSender(hc), handoff.NewReceiver(hc), handoff.NewMover(hc)
	v.Only(cfg.Regions)
	if cell != nil {
		v.Home(cfg.Region, cell.Figures)
	} else {
		v.Home(cfg.Region, nil)
	}
	v.Track(flights)
	v.Learn(est)
	return n, nil
}

// Close releases the node's idle connections to other regions' servers
// (call it once the API and the leader loops stopped).
func (n *Node) Close() { n.peer.Close() }

// Region is this server's region.
func (n *Node) Region() string { return n.cfg.Region }

// Store is the local region's store.
func (n *Node) Store() *store.Store { return n.store }

// View is the global view.
func (n *Node) View() *view.View { return n.view }

// Estimator holds the learnt durations placement uses: the view sets what
// every region's leader publishes (view.View.Learn).
func (n *Node) Estimator() *placement.Estimator { return n.est }

// Peer is the client of other regions' servers.
func (n *Node) Peer() *peer.Client { return n.peer }

// BudgetBook is the book of the tenants' budgets.
func (n *Node) BudgetBook() *budget.Book { return n.budgets }

// KnownRegion reports whether name is a region of the federation (this
// server's region or one of config regions:). Nothing else is contacted.
func (n *Node) KnownRegion(name string) bool { return n.peer.KnownRegion(name) }

// Proxy forwards one request to another region's server (peer.Client.Proxy).
func (n *Node) Proxy(ctx context.Context, regionName, method, path string, in, out any) error {
	return n.peer.Proxy(ctx, regionName, method, path, in, out)
}

// PlaceDue implements region.Placer (pick.Picker.PlaceDue).
func (n *Node) PlaceDue(ctx context.Context, tasks []*task.Task) []queue.Assignment {
	return n.picker.PlaceDue(ctx, tasks)
}

var _ region.Placer = (*Node)(nil)

// BudgetOf returns tenant's budget status; false when it has no budget.
func (n *Node) BudgetOf(tenant string) (budget.BudgetStatus, bool) { return n.budgets.Of(tenant) }

// Budgets are the budgets of tenant ("" every tenant) as this server
// judges them, by tenant name.
func (n *Node) Budgets(tenant string) []apiv1.CostBudget { return n.budgets.List(tenant) }

// BudgetRoom refuses a new source of tasks of tenant (a DAG run, a
// schedule) with a *BudgetError when it is past a refuse budget.
func (n *Node) BudgetRoom(tenant string) error { return n.budgets.Room(tenant) }

// SetBudgets puts budgets in force in place of Config.Budgets (budget.Book.Set).
func (n *Node) SetBudgets(budgets map[string]budget.Budget) { n.budgets.Set(budgets) }

// SharesLoop keeps this region's shares of the refuse budgets (a leader
// loop; budget.Book.SharesLoop).
func (n *Node) SharesLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	n.budgets.SharesLoop(ctx, f, lost)
}

// BudgetLoop rereads the spend of the tenants with a budget every
// Config.BudgetRefresh until ctx ends (budget.Book.Loop).
func (n *Node) BudgetLoop(ctx context.Context) { n.budgets.Loop(ctx) }

// RefreshBudgets reads this month's spend per tenant from every region
// (budget.Book.Refresh).
func (n *Node) RefreshBudgets(ctx context.Context) error { return n.budgets.Refresh(ctx) }

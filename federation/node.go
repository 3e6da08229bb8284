package federation

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
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
	// it holds (held.go).
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
	// Budgets are the tenants' monthly budgets (budget.go), by tenant;
	// nil: none. Node.SetBudgets replaces them.
	Budgets map[string]Budget
	// BudgetRefresh is how often BudgetLoop rereads the spend.
	BudgetRefresh time.Duration
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

// Node is the federation logic of one server.
type Node struct {
	cfg     Config
	store   *queue.Store
	cell    *region.Cell
	view    *View
	placer  *placement.Placer
	est     *placement.Estimator
	peers   *http.Client
	log     *slog.Logger
	metrics *Metrics
	flights *flights // placements not yet in their pools' published figures (inflight.go)
	members []string // the federation: cfg.Regions and cfg.Region (KnownRegion)
	// refusals: the regions refusing a tenant's hand-offs for its
	// max_backlog, left out of its placements for a while (backlog.go).
	refusals refusals
	budgets  budgets // the tenants' spend this month (budget.go)
	tracer   trace.Tracer
}

// NewNode ties a region's store and cell to the global view. The node is
// the cell's placer and runs leader loops beside it (cmd/ax passes them to
// cell.Run); it wakes the cell after submits and reads its figures. cell
// may be nil for a node that places nothing (tests drive its loops).
func NewNode(cfg Config, store *queue.Store, view *View, cell *region.Cell, m *Metrics) (*Node, error) {
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
		m = NewMetrics(nil)
	}
	var pools []string
	if cell != nil {
		pools = cell.PoolNames()
	}
	m.init(cfg.Region, pools)
	members := slices.Clone(cfg.Regions)
	if !slices.Contains(members, cfg.Region) {
		members = append(members, cfg.Region)
	}
	n := &Node{cfg: cfg, store: store, cell: cell, view: view, placer: pl, est: est, log: cfg.Logger, members: members,
		peers: peerClient(cfg.PeerTLS), metrics: m,
		// A placement not seen landing after this long is no longer counted
		// (its target is down, or another server of the region sends it).
		flights: newFlights(max(2*cfg.Placement.StaleAfter, 30*time.Second)),
		tracer:  tracing.Tracer(cfg.TracerProvider)}
	n.budgets.set = maps.Clone(cfg.Budgets)
	view.only(cfg.Regions)
	view.track(n.flights)
	view.learn(est)
	return n, nil
}

// Close releases the node's idle connections to other regions' servers
// (call it once the API and the leader loops stopped).
func (n *Node) Close() { n.peers.CloseIdleConnections() }

// Region is this server's region.
func (n *Node) Region() string { return n.cfg.Region }

// Store is the local region's store.
func (n *Node) Store() *queue.Store { return n.store }

// View is the global view.
func (n *Node) View() *View { return n.view }

// Estimator holds the learnt durations placement uses: the view sets what
// every region's leader publishes (View.learn).
func (n *Node) Estimator() *placement.Estimator { return n.est }

// Errors of the submission path, mapped to HTTP statuses by the API.
var (
	// ErrRegionUnavailable: a region this request needs (the one holding a
	// task, a key's home, one asked for by a fan-out) did not answer. The
	// region's name follows it in the wrapped error.
	ErrRegionUnavailable = errors.New("federation: region unavailable")
)

// PlacementError is a submit no pool can take: Unplaceable (422, no pool
// could ever match) or Saturated (429, every candidate is saturated).
type PlacementError struct {
	Saturated   bool
	RetryAfter  time.Duration
	Explanation placement.Explanation
}

func (e *PlacementError) Error() string {
	if e.Saturated {
		return "every eligible pool is saturated; retry later"
	}
	// The reasons pools were rejected, each once: a price cap or a budget's
	// cap read as a tag mismatch when the message named tags and regions only.
	var why []string
	for _, c := range e.Explanation.Candidates {
		if r := string(c.Reason); r != "" && !slices.Contains(why, r) {
			why = append(why, r)
		}
	}
	if len(why) == 0 {
		return "no pool in any region matches this task's tags and regions"
	}
	return "no pool in any region can take this task (" + strings.Join(why, ", ") + ")"
}

// QuotaError is a submit refused by one of its tenant's quotas (429).
type QuotaError struct {
	Field  string // the quota's key: "max_backlog"
	Tenant string
	Max    int
	// Have and Asked, when Asked > 0: the backlog read and the tasks a
	// DAG or schedule would add to it (BacklogRoom).
	Have, Asked int
	// Regions, when set: the other regions a task may run in, every one
	// refusing the tenant's hand-offs for its max_backlog there.
	Regions []string
}

func (e *QuotaError) Error() string {
	if len(e.Regions) > 0 {
		return fmt.Sprintf("every region this task may run in (%s) refuses tenant %s's tasks: its %s there is reached; wait for some to finish",
			strings.Join(e.Regions, ", "), e.Tenant, e.Field)
	}
	if e.Asked > 0 {
		return fmt.Sprintf("tenant %s has %d unfinished tasks in this region: %d more would pass its %s (%d); wait for some to finish",
			e.Tenant, e.Have, e.Asked, e.Field, e.Max)
	}
	return fmt.Sprintf("tenant %s has %d unfinished tasks in this region, its %s: wait for some to finish", e.Tenant, e.Max, e.Field)
}

// backlogMax is sp's tenant's max_backlog (0: none).
func (n *Node) backlogMax(sp *task.Spec) int { return n.backlogMaxOf(sp.Tenant) }

func (n *Node) backlogMaxOf(tenant string) int {
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
func (n *Node) BacklogRoom(ctx context.Context, tenant string, count int) error {
	max := n.backlogMaxOf(tenant)
	if max <= 0 {
		return nil
	}
	have, err := n.store.Backlog(ctx, tenant)
	if err != nil {
		return err
	}
	if have+count > max {
		n.metrics.rejected.WithLabelValues(n.cfg.Region, "backlog").Inc()
		return &QuotaError{Field: "max_backlog", Tenant: tenant, Max: max, Have: have, Asked: count}
	}
	return nil
}

// Outcome is the result of one submitted spec.
type Outcome struct {
	ID        string
	State     task.State
	Region    string // where it runs (or will)
	Pool      string // "" while unplaced
	Duplicate bool
	Err       error
}

// KeyHome is the home region of an idempotency key: rendezvous hashing of
// tenant+key over the configured regions, so every server agrees without
// talking and only 1/N of keys move when a region is added.
func (n *Node) KeyHome(tenant, key string) string {
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

// placeTask is sp as placement sees it now: its regions without those
// refusing its tenant's hand-offs for their max_backlog (backlog.go).
func (n *Node) placeTask(sp *task.Spec, now time.Time) placement.Task {
	pt := placeTask(sp, n.cfg.Region)
	pt.Regions, _ = n.placeRegions(sp.Regions, sp.Tenant, now)
	return pt
}

func placeTask(sp *task.Spec, home string) placement.Task {
	prio := 0
	if sp.Priority != nil {
		prio = *sp.Priority
	}
	return placement.Task{Type: sp.Type, Tags: sp.Tags, Regions: sp.Regions, Critical: sp.Critical, Priority: prio, Home: home,
		MaxWait: time.Duration(sp.MaxWait)}
}

// Explain is a dry-run placement of a spec.
func (n *Node) Explain(sp *task.Spec) (placement.Explanation, error) {
	if err := sp.Normalize(n.cfg.Defaults, n.cfg.Now()); err != nil {
		return placement.Explanation{}, err
	}
	// As Submit: a region outside the federation is the client's typo
	// (400 naming regions[i]), not "no pool matches" (UNPLACEABLE).
	if err := n.knownRegions(sp.Regions); err != nil {
		return placement.Explanation{}, err
	}
	return n.explain(n.view.Pools(), sp, n.cfg.Now()), nil
}

// PlaceDue implements region.Placer: due tasks of this region are placed
// with the prices and watermarks of now, across regions.
func (n *Node) PlaceDue(_ context.Context, tasks []*task.Task) []queue.Assignment {
	now := n.cfg.Now()
	vs := n.view.current()
	snap := vs.pools
	out := make([]queue.Assignment, 0, len(tasks))
	for _, t := range tasks {
		pt := placement.Task{Type: t.Type, Tags: t.Tags, Regions: t.Regions, Critical: t.Critical, Priority: t.Priority, Home: n.cfg.Region,
			MaxWait: time.Duration(t.MaxWait)}
		var ok bool
		if pt.Regions, ok = n.placeRegions(t.Regions, t.Tenant, now); !ok {
			// Every region it may go to refused its tenant's hand-offs
			// for their max_backlog: it waits here and is placed again.
			out = append(out, queue.Assignment{ID: t.ID, RetryAt: now.Add(n.cfg.NoCapacityRetry)})
			continue
		}
		d := n.placer.Place(snap, pt, now)
		if t.MaxPricePerSlotHour > 0 {
			ex := n.placer.Explain(snap, pt, now)
			ex.CapPrice(t.MaxPricePerSlotHour)
			d = ex.Decision
		}
		n.metrics.decision(n.cfg.Region, d)
		switch {
		case d.OK && d.Region == n.cfg.Region:
			out = append(out, queue.Assignment{ID: t.ID, Pool: d.Pool})
		case d.OK:
			out = append(out, queue.Assignment{ID: t.ID, Pool: d.Pool, Region: d.Region})
			n.flights.add(t.ID, d.Region, d.Pool, vs.updated[d.Region], now)
		default:
			out = append(out, queue.Assignment{ID: t.ID, RetryAt: now.Add(n.cfg.NoCapacityRetry)})
		}
	}
	return out
}

var _ region.Placer = (*Node)(nil)

// KnownRegion reports whether name is a region of the federation (this
// server's region or one of config `regions:`). Nothing else is contacted.
func (n *Node) KnownRegion(name string) bool { return slices.Contains(n.members, name) }

// unknownRegion is the error for a region name outside the federation: a
// client's mistake (400 naming the field), never "unavailable, retry".
func unknownRegion(name string) error {
	return &task.FieldError{Field: "region", Msg: "no region " + strconv.Quote(name) + " in the federation"}
}

// knownRegions refuses a task's allowed regions that name a region outside
// the federation: a typo would otherwise read as "no pool matches".
func (n *Node) knownRegions(names []string) error { return task.CheckRegions(names, n.members) }

// peerAPI is the API address of a region to call now, or an error: a
// healthy one, or one whose figures are fresh again and that no request
// found unanswered (not suspected) while placement's unhealthy_grace has
// yet to trust it. A call for a task held there (get, trail, an action, a
// schedule's slot, a region's part of a fan-out) has nowhere else to go:
// waiting out the grace, meant to keep placement from flapping, answered
// 503 for 10 s after the region had recovered (its Redis paused, then
// continued).
func (n *Node) peerAPI(name string) (string, error) {
	if !n.KnownRegion(name) {
		return "", unknownRegion(name)
	}
	r, ok := n.view.Region(name)
	if !ok || r.API == "" || !r.Healthy && (r.Stale || r.Suspect) {
		return "", fmt.Errorf("%w: %s", ErrRegionUnavailable, name)
	}
	return r.API, nil
}

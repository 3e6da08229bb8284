package region

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Pool is a configured worker pool of the region.
type Pool struct {
	Name string
	Tags map[string]string
	// Slots is the pool's configured slots: what it publishes is the least
	// of these and its live workers' concurrency (0: no cap, the workers').
	Slots            int
	QueueCapacity    int
	PricePerSlotHour float64
	Spot             bool
	Discount         float64
	ScaleFromZero    bool
	Schedule         *Schedule // optional capacity windows
	// Thresholds of queue fill for backpressure (zero: the region's).
	Thresholds Thresholds
	// MaxWait is the operator's target for a task's expected wait in the
	// pool (0: none), published for placement.
	MaxWait time.Duration
	// Tenants, when set, make the pool these tenants' own, published for
	// placement (nil: any tenant).
	Tenants []string
}

// Placer decides due tasks: a local pool, a pool of another region (the
// task goes through the outbox), or no capacity now (Pool "" with RetryAt).
// federation.Node implements it.
type Placer interface {
	PlaceDue(ctx context.Context, tasks []*task.Task) []queue.Assignment
}

// LeaderLoop is work a leader does during its term beside the cell's own
// loops (the federation's outbox sender, the DAG reconciler, ...). It
// returns when ctx ends, and calls lost when a fenced write of its was
// rejected (a newer leader exists).
type LeaderLoop func(ctx context.Context, f queue.Fence, lost func(error))

// Config of a cell. Zero (or negative) durations and counts take the
// defaults named.
type Config struct {
	Region string
	// Provider says where the region runs (aws, gcp, azure, other),
	// published with its figures.
	Provider string
	ID       string // this server's id, announced in the election (e.g. host:port)
	API      string // public API address published for other regions
	Pools    []Pool
	// Prefix is the etcd key prefix (lease.DefaultPrefix): the election is
	// <prefix>elect/region/<region> on the regional etcd, the registration
	// <prefix>regions/<region> on the global one.
	Prefix     string
	SessionTTL time.Duration // the election's and the registration's (lease.DefaultSessionTTL)
	// Heartbeat is the workers' heartbeat interval (queue.HeartbeatDefault).
	Heartbeat       time.Duration
	PublishInterval time.Duration // PublishIntervalDefault
	MaxSleep        time.Duration // longest the promoter and reaper sleep (MaxSleepDefault)
	Logger          *slog.Logger
	// Thresholds are the region's backpressure thresholds
	// (DefaultThresholds), and those of each pool that sets none.
	Thresholds Thresholds
	// Preemption limits (preempter.go).
	Preemption Preemption
	// StarvationThreshold: a task waiting longer counts in the starvation
	// gauge, ax_tasks_starving (StarvationThresholdDefault).
	StarvationThreshold time.Duration
	// RunTimeTypes bounds the learnt run times published per pool: the
	// types with the most observations (RunTimeTypesDefault).
	RunTimeTypes int
	// LivePrice, when set, returns a pool's price override per slot-hour
	// (before discount): the leader keeps each pool's live price in the
	// store, which claims record on the tasks.
	LivePrice func(pool string) (float64, bool)
	// Limits, when set, returns the region's limits now (its share of
	// federation-wide ones): the leader keeps them in the store, which
	// claims enforce (docs/limits.md). Called every tick: it may change.
	Limits func() []queue.Limit
	// FairShare, when set, returns the region's fair shares by pool now
	// (docs/fairness.md): the leader keeps them in the store, which claims
	// follow. Called every tick: it may change.
	FairShare func() map[string]queue.FairShare
	// SlowLanes, when set, returns the region's slow lanes by pool now
	// (docs/fairness.md): the leader keeps each lane's slots (its share of
	// the pool's published slots) and slow types (from the learnt run
	// times) in the store, which claims enforce. Called every tick.
	SlowLanes func() map[string]SlowLane
}

func (c *Config) defaults() {
	c.Prefix = cmp.Or(c.Prefix, lease.DefaultPrefix)
	c.SessionTTL = cmp.Or(max(c.SessionTTL, 0), lease.DefaultSessionTTL)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Thresholds == (Thresholds{}) {
		c.Thresholds = DefaultThresholds()
	}
	for i := range c.Pools {
		if c.Pools[i].Thresholds == (Thresholds{}) {
			c.Pools[i].Thresholds = c.Thresholds
		}
	}
}

// Cell is one server's membership in its region's cell.
type Cell struct {
	cfg      Config
	store    *store.Store
	regional *clientv3.Client
	global   *clientv3.Client // may equal regional
	metrics  *Metrics
	log      *slog.Logger

	wake chan struct{}

	leading       atomic.Bool
	token         atomic.Int64 // the last term's fencing token
	globalHealthy atomic.Bool

	// What outlives a term: the pools' backpressure, the leader's last
	// view, and what it exported.
	pressure *pressures
	view     *leaderView
	exp      *exported
}

// New makes a cell; Run runs it. Its Wake and Figures work from the start,
// so the federation node is built with the cell, and the cell runs with
// the node as its placer.
func New(store *store.Store, regional, global *clientv3.Client, cfg Config, m *Metrics) *Cell {
	cfg.defaults()
	if global == nil {
		global = regional
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	c := &Cell{cfg: cfg, store: store, regional: regional, global: global, metrics: m,
		log: cfg.Logger, wake: make(chan struct{}, 1), view: &leaderView{}, exp: newExported(cfg.Region, m)}
	c.pressure = newPressures(c.poolThresholds, cfg.Logger)
	c.globalHealthy.Store(true)
	m.init(cfg.Region, cfg.Pools)
	return c
}

// Leading reports whether this server leads its cell now.
func (c *Cell) Leading() bool { return c.leading.Load() }

// GlobalHealthy is false while the leader cannot publish to the global etcd.
func (c *Cell) GlobalHealthy() bool { return c.globalHealthy.Load() }

// PoolNames names the region's pools, as configured.
func (c *Cell) PoolNames() []string {
	out := make([]string, len(c.cfg.Pools))
	for i, p := range c.cfg.Pools {
		out[i] = p.Name
	}
	return out
}

// Admits reports whether pool takes tasks of tenant: it is no tenant's own
// (pools[].tenants), or tenant's. A pool not configured admits nothing.
func (c *Cell) Admits(pool, tenant string) bool {
	for _, p := range c.cfg.Pools {
		if p.Name == pool {
			return len(p.Tenants) == 0 || slices.Contains(p.Tenants, tenant)
		}
	}
	return false
}

// Figures returns the last figures this server computed as leader.
func (c *Cell) Figures() Figures { return c.view.figures() }

// Wake makes the leader's promoter look at once (a new earlier task, a
// due task waiting for placement). Never blocks.
func (c *Cell) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run campaigns for leadership of the cell until ctx ends, doing leader work
// during each term: its own services, placing due tasks with p, and loops
// beside them. A leader-only write rejected by the fence ends the term at
// once (the server that fenced it already leads). Without the global etcd
// the leader keeps promoting, placing (on its last known view, or locally)
// and reaping, and GlobalHealthy reports false.
//
// When ctx ends, the services stop (the publisher closing the term's
// registration, which deletes its key), the term is resigned and the
// session revoked; then Run returns.
func (c *Cell) Run(ctx context.Context, p Placer, loops ...LeaderLoop) error {
	el := lease.NewElector(c.regional, c.cfg.Prefix+"elect/region/"+c.cfg.Region, c.cfg.ID,
		lease.WithTTL(c.cfg.SessionTTL), lease.WithLogger(c.log))
	err := el.Run(ctx, func(ctx context.Context, l *lease.Leadership) { c.lead(ctx, l, p, loops) })
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// lead is one term. It fences the store, starts the term's services, and
// when the term ends (ctx, or a fenced write) stops them in the reverse
// order and waits for each before it returns.
func (c *Cell) lead(ctx context.Context, l *lease.Leadership, p Placer, extra []LeaderLoop) {
	t := &term{fence: queue.Fence{Name: "region", Token: l.Token()}, region: c.cfg.Region, log: c.log}
	// lost is called by any service whose fenced write was rejected: a
	// newer leader exists, so stop everything now.
	t.lost = func(err error) {
		if errors.Is(err, queue.ErrFenced) {
			c.metrics.fenced.WithLabelValues(c.cfg.Region).Inc()
			c.log.Warn("fenced write rejected; resigning", "token", l.Token())
			l.Lost(err)
		}
	}
	c.token.Store(l.Token())
	c.leading.Store(true)
	c.metrics.leader.WithLabelValues(c.cfg.Region).Set(1)
	c.metrics.leaderChanges.WithLabelValues(c.cfg.Region).Inc()
	c.metrics.lead(c.cfg.Region, c.cfg.Pools)
	c.log.Info("leading the cell", "token", l.Token(), "id", c.cfg.ID)
	defer func() {
		c.leading.Store(false)
		c.metrics.leader.WithLabelValues(c.cfg.Region).Set(0)
		// The term's services have stopped: nothing exports any more.
		c.metrics.forget(c.cfg.Region)
		c.exp.restart()
		c.log.Info("stopped leading the cell", "token", l.Token(), "reason", l.Err())
	}()
	if !c.fence(ctx, t) {
		return
	}
	services := c.services(t, p, extra)
	for _, s := range services {
		s.Start(ctx)
	}
	<-ctx.Done()
	for i := len(services) - 1; i >= 0; i-- {
		services[i].Stop()
	}
}

// fence fences every shard before any service writes: a deposed leader
// that has not noticed yet is refused on each shard from here on, not
// only on the shards this term happens to write to first. False when the
// term ended first.
func (c *Cell) fence(ctx context.Context, t *term) bool {
	for {
		err := c.store.Maintainer().Fence(ctx, t.fence)
		if err == nil {
			return true
		}
		if errors.Is(err, queue.ErrFenced) {
			t.lost(err)
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		c.log.Warn("cannot fence the store at the start of the term; retrying", "err", err)
		if !sleep(ctx, failedPause, nil) {
			return false
		}
	}
}

// services are a term's leader services, with extra's loops after them.
func (c *Cell) services(t *term, p Placer, extra []LeaderLoop) []service {
	cfg := c.cfg
	pub := &publisher{term: t, store: figures{c.store.Tasks(), c.store.Maintainer()}, trimmer: c.store.Maintainer(), global: c.global, pressure: c.pressure,
		view: c.view, exp: c.exp, healthy: &c.globalHealthy, cfg: publisherConfig{
			Region: cfg.Region, Provider: cfg.Provider, ID: cfg.ID, API: cfg.API, Pools: cfg.Pools,
			Key: cfg.Prefix + "regions/" + cfg.Region, SessionTTL: cfg.SessionTTL, Heartbeat: cfg.Heartbeat,
			PublishInterval: cfg.PublishInterval, StarvationThreshold: cfg.StarvationThreshold,
			RunTimeTypes: cfg.RunTimeTypes, SlowLanes: cfg.SlowLanes,
		}.withDefaults()}
	rcfg := republisherConfig{Every: min(pub.cfg.Heartbeat, RepublishEveryDefault), Pools: cfg.Pools,
		LivePrice: cfg.LivePrice, Limits: withWindows(cfg.Limits, cfg.Pools, c.store.Maintainer().Now), FairShare: cfg.FairShare}
	if cfg.SlowLanes != nil {
		rcfg.SlowLanes = func() (map[string]queue.SlowLane, bool) { return c.view.slowLanes(t.fence.Token) }
	}
	out := []service{
		newPromoter(promoterConfig{MaxSleep: cfg.MaxSleep, ReadmitRate: cfg.Preemption.ReadmitRate},
			t, c.store.Maintainer(), p, c.pressure, c.metrics, c.wake),
		newReaper(reaperConfig{MaxSleep: cfg.MaxSleep}, t, c.store.Maintainer(), c.metrics, c.Wake),
		pub,
		newRepublisher(rcfg, t, c.store.Maintainer(), c.store.Maintainer()),
		newSweeper(sweeperConfig{}, t, c.store.Maintainer(), c.metrics),
		newPreempter(cfg.Preemption, t, c.store.Maintainer(), c.metrics, c.Figures),
		newColdPromoter(coldPromoterConfig{Horizon: c.store.Options().ColdHorizon}, t, c.store.Maintainer()),
	}
	for _, loop := range extra {
		out = append(out, &loopService{loop: loop, term: t})
	}
	return out
}

func (c *Cell) poolThresholds(pool string) Thresholds {
	for _, p := range c.cfg.Pools {
		if p.Name == pool {
			return p.Thresholds
		}
	}
	return c.cfg.Thresholds
}

// pressureLevel is pool's backpressure level (0 none … 3 paused).
func (c *Cell) pressureLevel(pool string) int { return c.pressure.level(pool) }

func (c *Cell) String() string { return fmt.Sprintf("cell(%s/%s)", c.cfg.Region, c.cfg.ID) }

// leaderView is what the leader last collected, for Cell.Figures and the
// services that follow the figures. Safe for concurrent use.
type leaderView struct {
	mu    sync.Mutex
	figs  Figures
	lanes map[string]queue.SlowLane
}

// set keeps f, collected in the term of f.Token, and its slow lanes.
func (v *leaderView) set(f Figures, lanes map[string]queue.SlowLane) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.figs, v.lanes = f, lanes
}

func (v *leaderView) figures() Figures {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.figs
}

// slowLanes are the slow lanes as last collected in the term of token;
// false when none was collected in that term yet.
func (v *leaderView) slowLanes(token int64) (map[string]queue.SlowLane, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lanes, v.figs.Token == token
}

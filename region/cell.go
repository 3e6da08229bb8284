package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
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

// Config of a cell. Zero durations take the defaults noted.
type Config struct {
	Region string
	// Provider says where the region runs (aws, gcp, azure, other),
	// published with its figures.
	Provider string
	ID       string // this server's id, announced in the election (e.g. host:port)
	API      string // public API address published for other regions
	Pools    []Pool
	// Prefix is the etcd key prefix (default "/ax/"): the election is
	// <prefix>elect/region/<region> on the regional etcd, the registration
	// <prefix>regions/<region> on the global one.
	Prefix          string
	SessionTTL      time.Duration // default 5s
	Heartbeat       time.Duration // workers' heartbeat interval, default 3s
	PublishInterval time.Duration // default 2s
	MaxSleep        time.Duration // longest the promote/reap loops sleep, default 1s
	Logger          *slog.Logger
	// Thresholds are the region's backpressure thresholds (defaults 0.60,
	// 0.80, 0.95, 0.40).
	Thresholds Thresholds
	// Preemption limits (see preempt.go).
	Preemption Preemption
	// StarvationThreshold: a task waiting longer counts in the starvation
	// gauge, ax_tasks_starving (default 10m).
	StarvationThreshold time.Duration
	// RunTimeTypes bounds the learnt run times published per pool: the
	// types with the most observations (default 32).
	RunTimeTypes int
	// LivePrice, when set, returns a pool's price override per slot-hour
	// (before discount): the leader keeps each pool's live price in the
	// store, which claims record on the tasks (issue 14).
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
	if c.Prefix == "" {
		c.Prefix = "/ax/"
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 5 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 3 * time.Second
	}
	if c.PublishInterval <= 0 {
		c.PublishInterval = 2 * time.Second
	}
	if c.MaxSleep <= 0 {
		c.MaxSleep = time.Second
	}
	if c.StarvationThreshold <= 0 {
		c.StarvationThreshold = 10 * time.Minute
	}
	if c.RunTimeTypes <= 0 {
		c.RunTimeTypes = 32
	}
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
	c.Preemption.defaults()
}

// Cell is one server's membership in its region's cell.
type Cell struct {
	cfg      Config
	store    *queue.Store
	regional *clientv3.Client
	global   *clientv3.Client // may equal regional
	metrics  *Metrics
	log      *slog.Logger

	wake chan struct{}

	leading       atomic.Bool
	token         atomic.Int64
	globalHealthy atomic.Bool

	drain *drainRates // the house loop's (one at a time)

	mu       sync.Mutex
	figures  Figures
	pressure map[string]*pressure // by pool; leader-owned, read by PlaceDue

	limitedSeen map[string]int // "pool kind" → the store's count last exported (leader loop only)
	// fairStaleSeen: the store's FairStale last exported (leader loop only)
	fairStaleSeen int
	overSlots     map[string]int // pool → its live workers' slots last warned about (leader loop only)
}

// New makes a cell; Run runs it. Its Wake and Figures work from the start,
// so the federation node is built with the cell, and the cell runs with
// the node as its placer.
func New(store *queue.Store, regional, global *clientv3.Client, cfg Config, m *Metrics) *Cell {
	cfg.defaults()
	if global == nil {
		global = regional
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	c := &Cell{cfg: cfg, store: store, regional: regional, global: global, metrics: m,
		log: cfg.Logger, wake: make(chan struct{}, 1), drain: newDrainRates(), limitedSeen: map[string]int{}, overSlots: map[string]int{}}
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

// Figures returns the last figures this server computed as leader.
func (c *Cell) Figures() Figures {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.figures
}

// Wake makes the leader's promote loop look at once (a new earlier task, a
// due task waiting for placement). Never blocks.
func (c *Cell) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run campaigns for leadership of the cell until ctx ends, doing leader work
// during each term: its own loops, placing due tasks with p, and loops
// beside them.
func (c *Cell) Run(ctx context.Context, p Placer, loops ...LeaderLoop) error {
	el := lease.NewElector(c.regional, c.cfg.Prefix+"elect/region/"+c.cfg.Region, c.cfg.ID,
		lease.WithTTL(c.cfg.SessionTTL), lease.WithLogger(c.log))
	err := el.Run(ctx, func(ctx context.Context, l *lease.Leadership) { c.lead(ctx, l, p, loops) })
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// lead is one term. It returns when the term ends or ctx does.
func (c *Cell) lead(ctx context.Context, l *lease.Leadership, p Placer, extra []LeaderLoop) {
	fence := queue.Fence{Name: "region", Token: l.Token()}
	c.token.Store(l.Token())
	c.leading.Store(true)
	c.metrics.leader.WithLabelValues(c.cfg.Region).Set(1)
	c.metrics.leaderChanges.WithLabelValues(c.cfg.Region).Inc()
	c.log.Info("leading the cell", "token", l.Token(), "id", c.cfg.ID)
	defer func() {
		c.leading.Store(false)
		c.metrics.leader.WithLabelValues(c.cfg.Region).Set(0)
		c.metrics.forget(c.cfg.Region)
		c.log.Info("stopped leading the cell", "token", l.Token(), "reason", l.Err())
	}()

	// lost is called by any loop whose fenced write was rejected: a newer
	// leader exists, so stop everything now.
	lost := func(err error) {
		if errors.Is(err, queue.ErrFenced) {
			c.metrics.fenced.WithLabelValues(c.cfg.Region).Inc()
			c.log.Warn("fenced write rejected; resigning", "token", l.Token())
			l.Lost(err)
		}
	}
	// Fence every shard before any loop writes: a deposed leader that has
	// not noticed yet is refused on each shard from here on, not only on
	// the shards this term happens to write to first.
	for {
		err := c.store.Fence(ctx, fence)
		if err == nil {
			break
		}
		if errors.Is(err, queue.ErrFenced) {
			lost(err)
			return
		}
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("cannot fence the store at the start of the term; retrying", "err", err)
		if !c.sleep(ctx, 200*time.Millisecond, nil) {
			return
		}
	}
	var wg sync.WaitGroup
	promote := func(ctx context.Context, f queue.Fence, lost func(error)) { c.promoteLoop(ctx, f, lost, p) }
	loops := append([]LeaderLoop{promote, c.reapLoop, c.houseLoop, c.sweepLoop, c.preemptLoop, c.coldLoop}, extra...)
	for _, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx, fence, lost)
		}()
	}
	wg.Wait()
}

// sleep waits for d, a wake-up, or ctx; false when ctx ended.
func (c *Cell) sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	}
	return true
}

func (c *Cell) untilNext(next time.Time) time.Duration {
	if next.IsZero() {
		return c.cfg.MaxSleep
	}
	return min(max(time.Until(next), time.Millisecond), c.cfg.MaxSleep)
}

// promoteLoop promotes due tasks and places the ones waiting for placement.
func (c *Cell) promoteLoop(ctx context.Context, f queue.Fence, lost func(error), p Placer) {
	readmit := newBucket(c.cfg.Preemption.ReadmitRate, max(c.cfg.Preemption.ReadmitRate, 1))
	for ctx.Err() == nil {
		hot, spread := c.hotPools()
		res, err := c.store.Promote(ctx, f, queue.MaxBatch, queue.PromoteOptions{
			Readmit: readmit.available(time.Now()), HotPools: hot, Spread: spread,
		})
		if err != nil {
			if c.failed(ctx, "promote", err, lost) {
				return
			}
			continue
		}
		readmit.take(res.Readmit)
		c.metrics.promoted.WithLabelValues(c.cfg.Region).Add(float64(res.Moved))
		if res.Deferred > 0 {
			c.metrics.deferred.WithLabelValues(c.cfg.Region).Add(float64(res.Deferred))
		}
		if err := c.placeDue(ctx, f, p); err != nil {
			if c.failed(ctx, "place", err, lost) {
				return
			}
			continue
		}
		if res.Moved == queue.MaxBatch {
			continue // more are due now
		}
		if !c.sleep(ctx, c.untilNext(res.NextDue), c.wake) {
			return
		}
	}
}

func (c *Cell) placeDue(ctx context.Context, f queue.Fence, p Placer) error {
	for ctx.Err() == nil {
		due, err := c.store.DueTasks(ctx, queue.MaxBatch)
		if err != nil || len(due) == 0 {
			return err
		}
		as := c.backpressure(due, p.PlaceDue(ctx, due))
		if len(as) == 0 {
			return nil
		}
		res, err := c.store.Place(ctx, f, as)
		if err != nil {
			return err
		}
		c.metrics.placed.WithLabelValues(c.cfg.Region).Add(float64(res.Placed))
		if len(due) < queue.MaxBatch {
			return nil
		}
	}
	return ctx.Err()
}

// reapLoop moves expired leases on, sleeping until the next expiry.
func (c *Cell) reapLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	for ctx.Err() == nil {
		n, next, err := c.store.Reap(ctx, f, queue.MaxBatch)
		if err != nil {
			if c.failed(ctx, "reap", err, lost) {
				return
			}
			continue
		}
		if n > 0 {
			c.metrics.reaped.WithLabelValues(c.cfg.Region).Add(float64(n))
			c.log.Info("reaped expired leases", "n", n)
			c.Wake() // reaped tasks may be due for retry soon
		}
		if n == queue.MaxBatch {
			continue
		}
		if !c.sleep(ctx, c.untilNext(next), nil) {
			return
		}
	}
}

// failed handles a loop error: true when the loop must end (fenced or ctx
// done); otherwise it logs and backs off briefly.
func (c *Cell) failed(ctx context.Context, op string, err error, lost func(error)) bool {
	if ctx.Err() != nil {
		return true
	}
	if errors.Is(err, queue.ErrFenced) {
		lost(err)
		return true
	}
	c.log.Warn("leader loop error", "op", op, "err", err)
	return !c.sleep(ctx, 200*time.Millisecond, nil)
}

// houseLoop: dead workers, pool figures (published to the global etcd),
// prices, limits, slow lanes and run times (retention is sweepLoop's).
func (c *Cell) houseLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	mgr := lease.NewManager(c.global, lease.WithTTL(c.cfg.SessionTTL), lease.WithLogger(c.log))
	var reg *lease.Registration
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if reg != nil {
			_ = reg.Close(cctx)
		}
		_ = mgr.Close(cctx)
	}()
	key := c.cfg.Prefix + "regions/" + c.cfg.Region
	var last []PoolFigures
	var lastPublish time.Time
	var prices map[string]float64 // last written this term
	var pricesAt time.Time
	var limits []queue.Limit // last written this term
	var limitsAt time.Time
	limitsSet := false
	var fair map[string]queue.FairShare // last written this term
	var fairAt time.Time
	fairSet := false
	var lanes map[string]queue.SlowLane // last written this term
	var lanesAt time.Time
	lanesSet := false
	tick := time.NewTicker(min(c.cfg.Heartbeat, time.Second))
	defer tick.Stop()
	for {
		figs, qf, err := c.collect(ctx, f)
		collected := err == nil
		if err != nil {
			if c.failed(ctx, "figures", err, lost) {
				return
			}
		} else {
			c.observe(figs, qf)
			if moved(last, figs.Pools) || time.Since(lastPublish) >= c.cfg.PublishInterval {
				b, _ := json.Marshal(figs)
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				if reg == nil {
					reg, err = lease.Register(pctx, mgr, key, b)
				} else {
					err = reg.Update(pctx, b)
				}
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if c.globalHealthy.Swap(false) {
						c.log.Warn("global etcd unreachable; scheduling on the region's own view", "err", err)
					}
				} else {
					if !c.globalHealthy.Swap(true) {
						c.log.Info("global etcd reachable again")
					}
					last, lastPublish = figs.Pools, time.Now()
				}
			}
		}
		// Written when they change, and again every half minute in case the
		// store lost them (a Redis restarted empty).
		if p := c.livePrices(); prices == nil || !maps.Equal(p, prices) || time.Since(pricesAt) > 30*time.Second {
			if err := c.store.SetPrices(ctx, f, p); err != nil {
				if c.failed(ctx, "prices", err, lost) {
					return
				}
			} else {
				prices, pricesAt = p, time.Now()
			}
		}
		if c.cfg.Limits != nil {
			// over several shards every limit's parts follow the shards'
			// work: written every round (queue.Store.SetLimits)
			if l := c.cfg.Limits(); !limitsSet || !slices.Equal(l, limits) || time.Since(limitsAt) > 30*time.Second || c.store.LimitsMove(l) {
				if err := c.store.SetLimits(ctx, f, l); err != nil {
					if c.failed(ctx, "limits", err, lost) {
						return
					}
				} else {
					limits, limitsAt, limitsSet = slices.Clone(l), time.Now(), true
				}
			}
		}
		if c.cfg.FairShare != nil {
			// with several shards floors and maxes move their parts to the
			// tenants' work: written every round (queue.Store.SetFairShare)
			if fs := c.cfg.FairShare(); !fairSet || !reflect.DeepEqual(fs, fair) || time.Since(fairAt) > 30*time.Second || c.store.FairShareMoves(fs) {
				if err := c.store.SetFairShare(ctx, f, fs); err != nil {
					if c.failed(ctx, "fair share", err, lost) {
						return
					}
				} else {
					fair, fairAt, fairSet = fs, time.Now(), true
				}
			}
		}
		if collected && c.cfg.SlowLanes != nil {
			// with several shards a lane's slots move to the shards' slow
			// work: written every round (queue.Store.SetSlowLanes)
			if l := qf.slowLanes; !lanesSet || !reflect.DeepEqual(l, lanes) || time.Since(lanesAt) > 30*time.Second || c.store.SlowLanesMove(l) {
				if err := c.store.SetSlowLanes(ctx, f, l); err != nil {
					if c.failed(ctx, "slow lanes", err, lost) {
						return
					}
				} else {
					lanes, lanesAt, lanesSet = l, time.Now(), true
				}
			}
		}
		if _, err := c.store.TrimRunTimes(ctx, f); err != nil && c.failed(ctx, "trim run times", err, lost) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweepLoop: retention of dead letters and successes (queue.Store.Sweep).
// While successes past their retention are left it sweeps again after a
// pause as long as the last sweep took (at most half of Redis's time, and
// ~200 000 deletions a second with MaxBatch a call: more than any
// completion rate a Redis sustains); caught up, every sweepIdle.
func (c *Cell) sweepLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	defer c.metrics.sweepLag.WithLabelValues(c.cfg.Region).Set(0) // the next leader's figure
	for {
		start := time.Now()
		r, err := c.store.Sweep(ctx, f, queue.MaxBatch)
		if err != nil {
			if c.failed(ctx, "sweep", err, lost) {
				return
			}
			continue
		}
		c.metrics.sweepLag.WithLabelValues(c.cfg.Region).Set(r.Lag.Seconds())
		wait := sweepIdle
		if r.Left {
			wait = time.Since(start)
		}
		if !c.sleep(ctx, wait, nil) {
			return
		}
	}
}

// sweepIdle is the sweep's period while it is caught up (well within
// queue.SweepAlive).
const sweepIdle = 10 * time.Second

// queueFigures are the store's figures the leader exports as metrics only.
type queueFigures struct {
	dead, pending int
	held          int // hand-offs waiting for their sender's word
	starving      queue.Starving
	parked        map[string]int            // by pool
	limited       map[string]map[string]int // by pool and kind, since the store began
	fairStale     int                       // claims that met stale tenant-set entries, since the store began
	slowLanes     map[string]queue.SlowLane // what the lanes are now, by pool (SlowLanes set)
	lanes         map[string]queue.LimitState
}

// collect forgets dead workers and reads every pool's figures.
func (c *Cell) collect(ctx context.Context, f queue.Fence) (Figures, queueFigures, error) {
	// The figures are as of before the counts are read: a server forgets
	// its own placement into a pool once figures newer than the moment the
	// task landed arrive (federation's flights), so a task stored between
	// this read and a later timestamp would be counted nowhere.
	asOf := time.Now().UTC()
	counts, err := c.store.Counts(ctx)
	if err != nil {
		return Figures{}, queueFigures{}, err
	}
	qf := queueFigures{dead: counts.Dead, pending: counts.Pending, held: counts.Held, parked: counts.ParkedBy, limited: counts.LimitedBy, fairStale: counts.FairStale}
	pools := make([]string, len(c.cfg.Pools))
	for i, p := range c.cfg.Pools {
		pools[i] = p.Name
	}
	if qf.starving, err = c.store.Starving(ctx, pools, c.cfg.StarvationThreshold); err != nil {
		return Figures{}, queueFigures{}, err
	}
	rts, err := c.store.RunTimes(ctx)
	if err != nil {
		return Figures{}, queueFigures{}, err
	}
	learnt := runTimesByPool(rts, c.cfg.RunTimeTypes)
	drained, now := c.drain.count(rts), time.Now()
	// A worker is dead after missing about three heartbeats.
	cutoff := 3*c.cfg.Heartbeat + time.Second
	figs := Figures{Region: c.cfg.Region, Provider: c.cfg.Provider, API: c.cfg.API, Leader: c.cfg.ID, Token: f.Token, UpdatedAt: asOf}
	for _, p := range c.cfg.Pools {
		w, err := c.store.CleanWorkers(ctx, f, p.Name, cutoff)
		if err != nil {
			return Figures{}, queueFigures{}, err
		}
		if w.Removed > 0 {
			c.log.Info("forgot dead workers", "pool", p.Name, "n", w.Removed)
		}
		if p.ScaleFromZero {
			w.Types = nil // the workers it starts on demand may serve anything
		}
		slots := c.publishedSlots(p, w.Slots)
		figs.Pools = append(figs.Pools, PoolFigures{
			Name: p.Name, Tags: p.Tags, Slots: slots, Workers: w.Live,
			Running: counts.RunningBy[p.Name], Ready: counts.ReadyIn(p.Name),
			Parked:        counts.ParkedBy[p.Name],
			QueueCapacity: p.QueueCapacity, PricePerSlotHour: p.PricePerSlotHour,
			Spot: p.Spot, Discount: p.Discount, ScaleFromZero: p.ScaleFromZero, Schedule: p.Schedule,
			RunTimes:       learnt[p.Name],
			Types:          w.Types,
			DrainRate:      c.drain.rate(p.Name, now, drained[p.Name], counts.RunningBy[p.Name], slots),
			MaxWaitSeconds: p.MaxWait.Seconds(),
			Starving:       sumStarving(qf.starving.Ready[p.Name]),
		})
	}
	sort.Slice(figs.Pools, func(i, j int) bool { return figs.Pools[i].Name < figs.Pools[j].Name })
	for i := range figs.Pools {
		figs.Pools[i].Paused = c.updatePressure(figs.Pools[i])
	}
	if c.cfg.SlowLanes != nil {
		cfg := c.cfg.SlowLanes()
		qf.slowLanes = slowLanes(cfg, figs, rts)
		if qf.lanes, err = c.laneFigures(ctx, cfg); err != nil {
			return Figures{}, queueFigures{}, err
		}
	}
	return figs, qf, nil
}

func sumStarving(byPrio [task.MaxPriority + 1]int) int {
	n := 0
	for _, v := range byPrio {
		n += v
	}
	return n
}

// publishedSlots is what pool p publishes as its slots, live its live
// workers' concurrency summed: the least of the two (a task placed on
// slots no worker runs waits; slots past the configured ones are capacity
// the operator did not price or plan). Workers offering more than
// configured are logged once per change of their sum.
func (c *Cell) publishedSlots(p Pool, live int) int {
	if p.Slots <= 0 || live <= p.Slots {
		delete(c.overSlots, p.Name)
		return live
	}
	if c.overSlots[p.Name] != live {
		c.overSlots[p.Name] = live
		c.log.Warn("pool's live workers offer more slots than configured; publishing the configured slots",
			"pool", p.Name, "workers_slots", live, "slots", p.Slots)
	}
	return p.Slots
}

// runTimesByPool keeps each pool's top types (rts comes sorted by pool,
// then count, highest first).
func runTimesByPool(rts []queue.RunTime, top int) map[string][]RunTime {
	out := map[string][]RunTime{}
	for _, r := range rts {
		if len(out[r.Pool]) < top {
			out[r.Pool] = append(out[r.Pool], RunTime{Type: r.Type, Count: r.Count,
				Seconds: r.Mean.Seconds(), Spread: r.Spread.Seconds()})
		}
	}
	return out
}

// livePrices is each pool's price per slot-hour now: its override, else
// its configured price, after its discount (what a worker of the pool is
// configured to record).
func (c *Cell) livePrices() map[string]float64 {
	out := make(map[string]float64, len(c.cfg.Pools))
	for _, p := range c.cfg.Pools {
		price := p.PricePerSlotHour
		if c.cfg.LivePrice != nil {
			if o, ok := c.cfg.LivePrice(p.Name); ok {
				price = o
			}
		}
		out[p.Name] = price * (1 - p.Discount)
	}
	return out
}

func (c *Cell) observe(f Figures, q queueFigures) {
	c.mu.Lock()
	c.figures = f
	c.mu.Unlock()
	r := c.cfg.Region
	c.metrics.dead.WithLabelValues(r).Set(float64(q.dead))
	c.metrics.pending.WithLabelValues(r).Set(float64(q.pending))
	c.metrics.held.WithLabelValues(r).Set(float64(q.held))
	if d := q.fairStale - c.fairStaleSeen; d > 0 { // the store counts since it began
		c.metrics.fairStale.WithLabelValues(r).Add(float64(d))
	}
	c.fairStaleSeen = q.fairStale
	c.metrics.starving.WithLabelValues(r, "", "").Set(float64(q.starving.Unplaced))
	for pool, byPrio := range q.starving.Ready {
		for prio, n := range byPrio {
			c.metrics.starving.WithLabelValues(r, pool, strconv.Itoa(prio)).Set(float64(n))
		}
	}
	// Tenants come and go from the index: only those with work now.
	c.metrics.tenantStarving.DeletePartialMatch(prometheus.Labels{"region": r})
	for pool, byTenant := range q.starving.Tenants {
		for tn, n := range byTenant {
			c.metrics.tenantStarving.WithLabelValues(r, pool, tn).Set(float64(n))
		}
	}
	for _, p := range f.Pools {
		l := []string{c.cfg.Region, p.Name}
		c.metrics.pressure.WithLabelValues(l...).Set(float64(c.pressureLevel(p.Name)))
		c.metrics.slots.WithLabelValues(l...).Set(float64(p.Slots))
		c.metrics.running.WithLabelValues(l...).Set(float64(p.Running))
		c.metrics.ready.WithLabelValues(l...).Set(float64(p.Ready))
		c.metrics.fill.WithLabelValues(l...).Set(p.QueueFill())
		c.metrics.util.WithLabelValues(l...).Set(p.Utilisation())
		c.metrics.parked.WithLabelValues(l...).Set(float64(q.parked[p.Name]))
		if lane, ok := q.slowLanes[p.Name]; ok {
			c.metrics.laneSlots.WithLabelValues(l...).Set(float64(lane.Slots))
			c.metrics.laneRunning.WithLabelValues(l...).Set(float64(q.lanes[p.Name].Running))
		} else {
			c.metrics.laneSlots.DeleteLabelValues(l...)
			c.metrics.laneRunning.DeleteLabelValues(l...)
		}
		for kind, n := range q.limited[p.Name] {
			// The store counts since it began; the counter follows it
			// (a leader's first look adds all of it).
			k := p.Name + " " + kind
			if d := n - c.limitedSeen[k]; d > 0 {
				c.metrics.limited.WithLabelValues(c.cfg.Region, p.Name, kind).Add(float64(d))
			}
			c.limitedSeen[k] = n
		}
	}
}

func (c *Cell) String() string { return fmt.Sprintf("cell(%s/%s)", c.cfg.Region, c.cfg.ID) }

package region

import (
	"cmp"
	"context"
	"encoding/json"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
	"github.com/ax-sched/ax/queue/read"
	"github.com/ax-sched/ax/task"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of the figures publisher.
const (
	PublishIntervalDefault     = 2 * time.Second
	StarvationThresholdDefault = 10 * time.Minute
	RunTimeTypesDefault        = 32
)

// publishTimeout bounds each write to the global etcd, and the closing of
// the term's registration.
const publishTimeout = 2 * time.Second

// figuresStore is what the publisher reads of the store, and the dead
// workers it forgets.
type figuresStore interface {
	Counts(ctx context.Context) (*queue.Counts, error)
	Starving(ctx context.Context, pools []string, threshold time.Duration) (queue.Starving, error)
	RunTimes(ctx context.Context) ([]queue.RunTime, error)
	CleanWorkers(ctx context.Context, f queue.Fence, pool string, cutoff time.Duration) (queue.PoolWorkers, error)
	SlowLaneStatus(ctx context.Context, pool string) (queue.LimitState, error)
	startsReader
}

// runTimeTrimmer bounds the store's learnt run times.
type runTimeTrimmer interface {
	TrimRunTimes(ctx context.Context, f queue.Fence) (int, error)
}

// figures is a figuresStore over the store's reads and its leader stage.
type figures struct {
	*read.Tasks
	*maint.Maintainer
}

var (
	_ figuresStore   = figures{}
	_ runTimeTrimmer = (*maint.Maintainer)(nil)
)

// publisherConfig tunes the figures publisher.
type publisherConfig struct {
	Region, Provider, ID, API string
	Pools                     []Pool
	// Key is where the figures go in the global etcd, bound to a lease of
	// SessionTTL.
	Key        string
	SessionTTL time.Duration
	// Heartbeat is the workers' heartbeat interval (queue.HeartbeatDefault): a
	// worker that missed about three is dead, and the publisher looks at
	// least once a second, at most once a Heartbeat.
	Heartbeat time.Duration
	// PublishInterval is the longest between two publications
	// (PublishIntervalDefault); a figure that moved publishes at once.
	PublishInterval time.Duration
	// StarvationThreshold: a task waiting longer counts as starving
	// (StarvationThresholdDefault).
	StarvationThreshold time.Duration
	// RunTimeTypes: the types with the most observations published per
	// pool (RunTimeTypesDefault).
	RunTimeTypes int
	// SlowLanes, when set, returns the slow lanes by pool now.
	SlowLanes func() map[string]SlowLane
}

// publisher forgets dead workers, reads every pool's figures, updates the
// pools' backpressure from them, exports them as metrics, keeps them for
// Cell.Figures and the other services, publishes them to the global etcd
// (reporting its health), and bounds the learnt run times.
type publisher struct {
	startStop
	cfg      publisherConfig
	term     *term
	store    figuresStore
	trimmer  runTimeTrimmer
	global   *clientv3.Client
	pressure *pressures
	view     *leaderView
	exp      *exported
	healthy  *atomic.Bool // the global etcd took the last write
}

var _ service = (*publisher)(nil)

func (s *publisher) Start(ctx context.Context) { s.start(ctx, s.run) }

func (s *publisher) run(ctx context.Context) {
	mgr := lease.NewManager(s.global, lease.WithTTL(s.cfg.SessionTTL), lease.WithLogger(s.term.log))
	var reg *lease.Registration
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		defer cancel()
		if reg != nil {
			_ = reg.Close(cctx)
		}
		_ = mgr.Close(cctx)
	}()
	var last []PoolFigures
	var lastPublish time.Time
	tick := time.NewTicker(min(s.cfg.Heartbeat, time.Second))
	defer tick.Stop()
	for {
		figs, qf, err := s.collect(ctx)
		if err != nil {
			if s.term.failed(ctx, "figures", err) {
				return
			}
		} else {
			s.view.set(figs, qf.slowLanes)
			s.exp.observe(figs, qf, s.pressure)
			if moved(last, figs.Pools) || time.Since(lastPublish) >= s.cfg.PublishInterval {
				b, _ := json.Marshal(figs)
				pctx, cancel := context.WithTimeout(ctx, publishTimeout)
				if reg == nil {
					reg, err = lease.Register(pctx, mgr, s.cfg.Key, b)
				} else {
					err = reg.Update(pctx, b)
				}
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if s.healthy.Swap(false) {
						s.term.log.Warn("global etcd unreachable; scheduling on the region's own view", "err", err)
					}
				} else {
					if !s.healthy.Swap(true) {
						s.term.log.Info("global etcd reachable again")
					}
					last, lastPublish = figs.Pools, time.Now()
				}
			}
		}
		if _, err := s.trimmer.TrimRunTimes(ctx, s.term.fence); err != nil && s.term.failed(ctx, "trim run times", err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

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
func (s *publisher) collect(ctx context.Context) (Figures, queueFigures, error) {
	// The figures are as of before the counts are read: a server forgets
	// its own placement into a pool once figures newer than the moment the
	// task landed arrive (federation's flights), so a task stored between
	// this read and a later timestamp would be counted nowhere.
	asOf := time.Now().UTC()
	counts, err := s.store.Counts(ctx)
	if err != nil {
		return Figures{}, queueFigures{}, err
	}
	qf := queueFigures{dead: counts.Dead, pending: counts.Pending, held: counts.Held, parked: counts.ParkedBy, limited: counts.LimitedBy, fairStale: counts.FairStale}
	pools := make([]string, len(s.cfg.Pools))
	for i, p := range s.cfg.Pools {
		pools[i] = p.Name
	}
	if qf.starving, err = s.store.Starving(ctx, pools, s.cfg.StarvationThreshold); err != nil {
		return Figures{}, queueFigures{}, err
	}
	rts, err := s.store.RunTimes(ctx)
	if err != nil {
		return Figures{}, queueFigures{}, err
	}
	learnt := runTimesByPool(rts, s.cfg.RunTimeTypes)
	drained, now := s.exp.drain.count(rts), time.Now()
	if err := s.exp.waits.look(ctx, s.store, now); err != nil {
		s.term.log.Debug("ready-to-start sample", "err", err) // the window stays as it was
	}
	// A worker is dead after missing about three heartbeats.
	cutoff := 3*s.cfg.Heartbeat + time.Second
	figs := Figures{Region: s.cfg.Region, Provider: s.cfg.Provider, API: s.cfg.API, Leader: s.cfg.ID, Token: s.term.fence.Token, UpdatedAt: asOf}
	for _, p := range s.cfg.Pools {
		w, err := s.store.CleanWorkers(ctx, s.term.fence, p.Name, cutoff)
		if err != nil {
			return Figures{}, queueFigures{}, err
		}
		if w.Removed > 0 {
			s.term.log.Info("forgot dead workers", "pool", p.Name, "n", w.Removed)
		}
		if p.ScaleFromZero {
			w.Types = nil // the workers it starts on demand may serve anything
		}
		slots := s.exp.publishedSlots(p, w.Slots, s.term.log)
		figs.Pools = append(figs.Pools, PoolFigures{
			Name: p.Name, Tags: p.Tags, Slots: slots, Workers: w.Live,
			Running: counts.RunningBy[p.Name], Ready: counts.ReadyIn(p.Name),
			RunningSlots:  float64(counts.MilliBy[p.Name]) / task.MilliSlots,
			Parked:        counts.ParkedBy[p.Name],
			QueueCapacity: p.QueueCapacity, PricePerSlotHour: p.PricePerSlotHour,
			Spot: p.Spot, Discount: p.Discount, ScaleFromZero: p.ScaleFromZero, Schedule: p.Schedule,
			RunTimes:       learnt[p.Name],
			Types:          w.Types,
			DrainRate:      s.exp.drain.rate(p.Name, now, drained[p.Name], counts.MilliBy[p.Name], slots*task.MilliSlots),
			MaxWaitSeconds: p.MaxWait.Seconds(),
			Tenants:        p.Tenants,
			Starving:       sumStarving(qf.starving.Ready[p.Name]),
		})
		if p99, ok := s.exp.waits.p99(p.Name); ok {
			figs.Pools[len(figs.Pools)-1].WaitP99Seconds = &p99
		}
	}
	sort.Slice(figs.Pools, func(i, j int) bool { return figs.Pools[i].Name < figs.Pools[j].Name })
	for i := range figs.Pools {
		figs.Pools[i].Paused = s.pressure.update(figs.Pools[i])
	}
	if s.cfg.SlowLanes != nil {
		cfg := s.cfg.SlowLanes()
		qf.slowLanes = slowLanes(cfg, figs, rts)
		if qf.lanes, err = s.laneFigures(ctx, cfg); err != nil {
			return Figures{}, queueFigures{}, err
		}
	}
	return figs, qf, nil
}

// laneFigures reads the slow lanes' running and parked tasks, by pool.
func (s *publisher) laneFigures(ctx context.Context, lanes map[string]SlowLane) (map[string]queue.LimitState, error) {
	out := map[string]queue.LimitState{}
	for pool := range lanes {
		st, err := s.store.SlowLaneStatus(ctx, pool)
		if err != nil {
			return nil, err
		}
		out[pool] = st
	}
	return out, nil
}

func sumStarving(byPrio [task.MaxPriority + 1]int) int {
	n := 0
	for _, v := range byPrio {
		n += v
	}
	return n
}

// runTimesByPool keeps at most top of each pool's run times (rts comes
// sorted by pool, then count, highest first): every tenant's most observed
// first, then every tenant's second, and so on, each round by count; the
// kept ones by count, highest first.
func runTimesByPool(rts []queue.RunTime, top int) map[string][]RunTime {
	// rank[i]: how many of its tenant's pairs in its pool come before rts[i].
	rank := make([]int, len(rts))
	seen := map[[2]string]int{}
	for i, r := range rts {
		k := [2]string{r.Pool, r.Tenant}
		rank[i] = seen[k]
		seen[k]++
	}
	order := make([]int, len(rts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, rb := rts[order[a]], rts[order[b]]
		if ra.Pool != rb.Pool {
			return ra.Pool < rb.Pool
		}
		return rank[order[a]] < rank[order[b]]
	})
	out := map[string][]RunTime{}
	for _, i := range order {
		r := rts[i]
		if len(out[r.Pool]) < top {
			out[r.Pool] = append(out[r.Pool], RunTime{Type: r.Type, Tenant: r.Tenant, Count: r.Count,
				Seconds: r.Mean.Seconds(), Spread: r.Spread.Seconds()})
		}
	}
	for _, l := range out {
		sort.SliceStable(l, func(a, b int) bool { return l[a].Count > l[b].Count })
	}
	return out
}

func (c publisherConfig) withDefaults() publisherConfig {
	c.Heartbeat = cmp.Or(max(c.Heartbeat, 0), queue.HeartbeatDefault)
	c.PublishInterval = cmp.Or(max(c.PublishInterval, 0), PublishIntervalDefault)
	c.StarvationThreshold = cmp.Or(max(c.StarvationThreshold, 0), StarvationThresholdDefault)
	c.RunTimeTypes = cmp.Or(max(c.RunTimeTypes, 0), RunTimeTypesDefault)
	return c
}

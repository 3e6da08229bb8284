package view

import (
	"encoding/json"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/region"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RegionInfo is one region as this server sees it.
type RegionInfo struct {
	region.Figures
	Registered bool // a registration exists now
	Stale      bool // figures older than stale_after
	Healthy    bool // after the grace period: registered and fresh, and not suspected
	Suspect    bool // requests to it went unanswered moments ago (View.Suspect)
}

// View is this server's picture of every region, from a watch on the global
// etcd: registrations (/ax/regions/<r>) and price overrides
// (/ax/prices/<region>/<pool>). A region must look bad for a sustained
// grace period before it counts as unhealthy, and recover the same way, so
// one late publish does not flap placement.
type View struct {
	prefix     string
	staleAfter time.Duration
	grace      time.Duration
	pcfg       placement.Config
	log        *slog.Logger
	regions    *lease.View
	prices     *lease.View
	fairShares *lease.View // /ax/fairshare/<region>/<pool>: live fair-share overrides (FairShareOverrides)
	servers    *lease.View // <prefix>servers/: every announced server (Announce)

	mu     sync.Mutex
	health map[string]*health

	snap    atomic.Pointer[Snap]
	flights atomic.Pointer[Flights]             // the node's placements not yet in the figures (flights.go)
	est     atomic.Pointer[placement.Estimator] // gets the published run times (estimates.go)
	taught  map[string]time.Time                // region → UpdatedAt of the figures est got (under mu)
	// published: region → UpdatedAt of its newest figures seen and of the
	// ones before them (under mu; placement.Pool.PrevUpdatedAt).
	published map[string][2]time.Time
	// members are the regions of the federation (config `regions:`); a
	// registration of any other name is ignored, so a stray or forged entry
	// in the global etcd is never placed on or contacted. nil: all.
	members atomic.Pointer[map[string]bool]
	ignored map[string]bool // non-members already warned about (under mu)
	// suspects are regions whose hand-offs went unanswered (no reply at
	// all), until when (under mu): placement treats them as unhealthy at
	// once, without waiting for their registration to expire or for the
	// health grace, so a dead region stops drawing new work within one
	// outbox round.
	suspects map[string]time.Time
	// home is this server's region, and local its leader's figures (zero
	// when this server does not lead): the region's own figures are local
	// truth in its own view, whatever the global etcd says (Home).
	home     atomic.Pointer[string]
	local    atomic.Pointer[func() region.Figures]
	lastHome region.Figures // the newest home figures seen from either source (under mu)
	stop     chan struct{}
	done     chan struct{}
	closed   sync.Once
}

type health struct {
	healthy bool
	since   time.Time // when the current observation (good or bad) started differing
}

type Snap struct {
	infos   []RegionInfo
	Pools   *placement.Snapshot
	Updated map[string]time.Time // region → UpdatedAt of its figures in pools
	prices  map[string]float64   // "<region>/<pool>" → price override
	built   time.Time
}

// current is the snapshot with the figure times it was built from.
func (v *View) Current() *Snap { return v.snap.Load() }

// Track makes placement count fl's placements that the published figures
// miss into the Ready of their pools.
func (v *View) Track(fl *Flights) {
	v.flights.Store(fl)
	v.Refresh()
}

// Only limits the view to the federation's regions.
func (v *View) Only(regions []string) {
	m := make(map[string]bool, len(regions))
	for _, r := range regions {
		m[r] = true
	}
	v.members.Store(&m)
	v.Refresh()
}

// Home names this server's region and where its leader's figures are read
// (local; nil or zero figures when this server does not lead). The home
// region never looks stale, unregistered or unhealthy in this view: it
// is placed on with the newest figures either its leader or the global
// etcd gave, even while the global etcd is cut off or its registration
// there lapsed. Its store's admission stays authoritative.
func (v *View) Home(name string, local func() region.Figures) {
	v.home.Store(&name)
	if local != nil {
		v.local.Store(&local)
	}
	v.Refresh()
}

// New starts watching the global etcd under prefix (e.g. "/ax/").
func New(c *clientv3.Client, prefix string, pcfg placement.Config, grace time.Duration, log *slog.Logger) *View {
	if log == nil {
		log = slog.Default()
	}
	v := &View{
		prefix: prefix, staleAfter: pcfg.StaleAfter, grace: grace, pcfg: pcfg, log: log,
		regions:    lease.NewView(c, prefix+"regions/", lease.WithLogger(log)),
		prices:     lease.NewView(c, prefix+"prices/", lease.WithLogger(log)),
		fairShares: lease.NewView(c, prefix+"fairshare/", lease.WithLogger(log)),
		servers:    lease.NewView(c, prefix+"servers/", lease.WithLogger(log)),
		health:     map[string]*health{},
		published:  map[string][2]time.Time{},
		stop:       make(chan struct{}), done: make(chan struct{}),
	}
	v.rebuild(time.Now())
	go v.run()
	return v
}

// run rebuilds the snapshot on every change, and at least every 200 ms so
// staleness and grace periods advance without changes.
func (v *View) run() {
	defer close(v.done)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-v.regions.Changes():
		case <-v.prices.Changes():
		case <-v.servers.Changes():
		case <-t.C:
		}
		v.rebuild(time.Now())
	}
}

// Close stops the watches.
func (v *View) Close() {
	v.closed.Do(func() {
		close(v.stop)
		<-v.done
		v.regions.Close()
		v.prices.Close()
		v.fairShares.Close()
		v.servers.Close()
	})
}

// FairShareOverrides are the live fair-share overrides an operator set for
// region's pools in the global etcd (/ax/fairshare/<region>/<pool>), by
// pool, as written (the region's server checks them against its own
// config: docs/fairness.md).
func (v *View) FairShareOverrides(region string) map[string][]byte {
	var out map[string][]byte
	at := v.prefix + "fairshare/" + region + "/"
	for k, b := range v.fairShares.Snapshot().All() {
		if pool, ok := strings.CutPrefix(k, at); ok && pool != "" && !strings.Contains(pool, "/") {
			if out == nil {
				out = map[string][]byte{}
			}
			out[pool] = b
		}
	}
	return out
}

// Connected is false while the global etcd cannot be reached (the view is
// the last known one).
func (v *View) Connected() bool { return v.regions.Healthy() }

// ConnectedGauge exports Connected as ax_global_view_connected.
func (v *View) ConnectedGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ax_global_view_connected",
		Help: "1 while this server's watch of the global etcd is current; 0 while it runs on its last known view."},
		func() float64 {
			if v.Connected() {
				return 1
			}
			return 0
		})
}

// Ready closes once the first listing arrived.
func (v *View) Ready() <-chan struct{} { return v.regions.Ready() }

// Regions returns every known region, sorted by name.
func (v *View) Regions() []RegionInfo { return v.snap.Load().infos }

// Region returns one region.
func (v *View) Region(name string) (RegionInfo, bool) {
	for _, r := range v.Regions() {
		if r.Region == name {
			return r, true
		}
	}
	return RegionInfo{}, false
}

// Servers is how many servers of region are announced (Announce).
func (v *View) Servers(region string) int {
	n := 0
	prefix := v.prefix + "servers/" + region + "/"
	for k := range v.servers.Snapshot().All() {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// Pools is the placement snapshot built from the current view.
func (v *View) Pools() *placement.Snapshot { return v.snap.Load().Pools }

// Refresh rebuilds the snapshot now (tests, and after a known change).
func (v *View) Refresh() { v.rebuild(time.Now()) }

// Suspect marks a region unhealthy for the stale window (placement's
// stale_after, at least 1 s): a request to it got no answer at all.
func (v *View) Suspect(name string, now time.Time) {
	v.mu.Lock()
	if v.suspects == nil {
		v.suspects = map[string]time.Time{}
	}
	_, was := v.suspects[name]
	v.suspects[name] = now.Add(max(v.staleAfter, time.Second))
	v.mu.Unlock()
	if !was {
		v.log.Warn("region suspected down: requests to it went unanswered; placing elsewhere", "peer", name)
	}
	v.rebuild(now)
}

// Vouch clears a suspicion: the region answered.
func (v *View) Vouch(name string) {
	v.mu.Lock()
	_, was := v.suspects[name]
	delete(v.suspects, name)
	v.mu.Unlock()
	if was {
		v.log.Info("region answers again", "peer", name)
		v.rebuild(time.Now())
	}
}

// Healthy reports whether placement may choose the region now.
func (v *View) Healthy(name string) bool {
	r, ok := v.Region(name)
	return ok && r.Healthy
}

// member reports whether name is a region of the federation.
func (v *View) member(name string) bool {
	m := v.members.Load()
	return m == nil || (*m)[name]
}

// ignore warns once about a registration that is not one of the
// federation's regions (or names another region than its key).
func (v *View) ignore(key, name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ignored == nil {
		v.ignored = map[string]bool{}
	}
	if !v.ignored[key+"="+name] {
		v.ignored[key+"="+name] = true
		v.log.Warn("ignoring a region registration that is not in regions: (check who can write the global etcd)", "key", key, "peer", name)
	}
}

func (v *View) rebuild(now time.Time) {
	prices := map[string]float64{}
	for k, b := range v.prices.Snapshot().All() {
		key := strings.TrimPrefix(k, v.prefix+"prices/")
		var o struct {
			Price *float64 `json:"price_per_slot_hour"`
		}
		if err := json.Unmarshal(b, &o); err == nil && o.Price != nil {
			prices[key] = *o.Price
		} else if f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil {
			prices[key] = f
		}
	}
	var infos []RegionInfo
	for k, b := range v.regions.Snapshot().All() {
		var f region.Figures
		if err := json.Unmarshal(b, &f); err != nil {
			v.log.Warn("bad region registration", "key", k, "err", err)
			continue
		}
		if name := strings.TrimPrefix(k, v.prefix+"regions/"); name != f.Region || !v.member(name) {
			v.ignore(k, f.Region)
			continue
		}
		setPrices(f, prices)
		infos = append(infos, RegionInfo{Figures: f, Registered: true, Stale: v.stale(f, now)})
	}
	v.mu.Lock()
	infos = v.withHome(infos, prices)
	seen := map[string]bool{}
	prevAt := make(map[string]time.Time, len(infos))
	for i := range infos {
		r := &infos[i]
		seen[r.Region] = true
		prevAt[r.Region] = v.prevPublished(r.Region, r.UpdatedAt)
		r.Healthy = v.judge(r.Region, !r.Stale, now)
		if v.isHome(r.Region) {
			// This server runs in it: it is live, whatever was suspected.
			delete(v.suspects, r.Region)
			continue
		}
		if until, ok := v.suspects[r.Region]; ok {
			if now.Before(until) {
				r.Healthy, r.Suspect = false, true
			} else {
				delete(v.suspects, r.Region)
			}
		}
	}
	for name := range v.health {
		if !seen[name] {
			v.judge(name, false, now)
		}
	}
	v.mu.Unlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Region < infos[j].Region })
	updated := make(map[string]time.Time, len(infos))
	for _, r := range infos {
		updated[r.Region] = r.UpdatedAt
	}
	if est := v.est.Load(); est != nil {
		v.teach(est, infos)
	}
	var inFlight map[string]int
	if fl := v.flights.Load(); fl != nil {
		inFlight = fl.missing(updated, now)
	}
	var pools []placement.Pool
	for _, r := range infos {
		for _, p := range r.Pools {
			win := WindowOf(p.Schedule)
			switch {
			case p.Workers == 0 && !p.ScaleFromZero:
				// A capacity window lends what the pool's live workers
				// have; with none alive it lends nothing (NO_SLOTS), or an
				// open window would draw tasks nobody runs.
				win = nil
			case !p.ScaleFromZero:
				// With some alive, at most their slots (the published
				// slots: the configured ones capped by the live workers').
				win.Cap(p.Slots)
			}
			pools = append(pools, placement.Pool{
				Region: r.Region, Name: p.Name, Tags: p.Tags, Slots: p.Slots, Running: p.Running, RunningSlots: p.Busy(),
				Ready:         p.Ready + inFlight[r.Region+"/"+p.Name],
				QueueCapacity: p.QueueCapacity, PricePerSlotHour: p.PricePerSlotHour, Spot: p.Spot,
				Discount: p.Discount, Window: win, UpdatedAt: r.UpdatedAt, PrevUpdatedAt: prevAt[r.Region],
				RegionHealthy: r.Healthy, Local: v.isHome(r.Region), ScaleFromZero: p.ScaleFromZero, Paused: p.Paused,
				Types: p.Types, DrainRate: p.DrainRate, MaxWait: seconds(p.MaxWaitSeconds), Tenants: p.Tenants,
			})
		}
	}
	snap, err := placement.NewSnapshot(v.pcfg, pools)
	if err != nil {
		v.log.Warn("placement snapshot", "err", err)
		snap, _ = placement.NewSnapshot(v.pcfg, nil)
	}
	// Servers announced in the global etcd (Announce) share each pool's
	// headroom; none announced: the configured count.
	snap.WithServers(v.servers.Snapshot().Len())
	v.snap.Store(&Snap{infos: infos, Pools: snap, Updated: updated, prices: prices, built: now})
}

// prevPublished records that region's newest figures were published at and
// returns when the figures before them were (zero: not seen). v.mu held.
func (v *View) prevPublished(region string, at time.Time) time.Time {
	p := v.published[region]
	switch {
	case at.After(p[0]):
		v.published[region] = [2]time.Time{at, p[0]}
		return p[0]
	case at.Equal(p[0]):
		return p[1]
	}
	return time.Time{}
}

// stale is the staleness rule: figures older than stale_after, unless
// they are the home region's, which are local truth (Home).
func (v *View) stale(f region.Figures, now time.Time) bool {
	return !v.isHome(f.Region) && now.Sub(f.UpdatedAt) > v.staleAfter
}

// isHome reports whether name is this server's region.
func (v *View) isHome(name string) bool {
	h := v.home.Load()
	return h != nil && *h == name
}

// withHome puts the home region's newest figures in infos (v.mu held):
// its leader's when newer than the registration's, else the last ones
// seen when the registration lapsed. They keep the time they were
// published (the placer's damping counts from it); the staleness rule
// exempts them (stale, placement.Pool.Local).
func (v *View) withHome(infos []RegionInfo, prices map[string]float64) []RegionInfo {
	h := v.home.Load()
	if h == nil || !v.member(*h) {
		return infos
	}
	at := -1
	for i := range infos {
		if infos[i].Region == *h {
			at = i
			if infos[i].UpdatedAt.After(v.lastHome.UpdatedAt) {
				v.lastHome = cloneFigures(infos[i].Figures)
			}
		}
	}
	if lf := v.local.Load(); lf != nil {
		if f := (*lf)(); f.Region == *h && f.UpdatedAt.After(v.lastHome.UpdatedAt) {
			v.lastHome = cloneFigures(f)
		}
	}
	if v.lastHome.Region != *h {
		return infos // nothing known of the home region yet
	}
	f := cloneFigures(v.lastHome)
	setPrices(f, prices)
	ri := RegionInfo{Figures: f, Registered: true}
	if at < 0 {
		infos = append(infos, ri)
	} else {
		infos[at] = ri
	}
	return infos
}

// setPrices sets each of f's pools to its live price in prices (keyed
// "<region>/<pool>"), where there is one; it writes f's pool slice in place.
func setPrices(f region.Figures, prices map[string]float64) {
	for i, p := range f.Pools {
		if pr, ok := prices[f.Region+"/"+p.Name]; ok {
			f.Pools[i].PricePerSlotHour = pr
		}
	}
}

// cloneFigures copies f's pools, which the view edits.
func cloneFigures(f region.Figures) region.Figures {
	f.Pools = append([]region.PoolFigures(nil), f.Pools...)
	return f
}

// judge applies the grace period to one region's observation; v.mu is held.
func (v *View) judge(name string, good bool, now time.Time) bool {
	h := v.health[name]
	if h == nil {
		// First sight: believe it at once (a fresh server must be able to place).
		h = &health{healthy: good, since: time.Time{}}
		v.health[name] = h
		return good
	}
	if good == h.healthy {
		h.since = time.Time{}
		return h.healthy
	}
	if h.since.IsZero() {
		h.since = now
	}
	if now.Sub(h.since) >= v.grace {
		h.healthy, h.since = good, time.Time{}
		v.log.Info("region health changed", "peer", name, "healthy", good)
	}
	return h.healthy
}

// WindowOf converts a published schedule to placement's: inside a window
// the window's slots, outside every window none (the complement windows
// carry 0 slots).
func WindowOf(s *region.Schedule) *placement.CapacitySchedule {
	if s == nil || len(s.Windows) == 0 {
		return nil
	}
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		loc = time.UTC
	}
	cs := &placement.CapacitySchedule{Location: loc}
	type span struct{ a, b int }
	var covered []span
	for _, w := range s.Windows {
		a, err1 := placement.ParseTimeOfDay(w.Start)
		b, err2 := placement.ParseWindowEnd(w.End)
		if err1 != nil || err2 != nil {
			continue
		}
		cs.Windows = append(cs.Windows, placement.Window{Start: a, End: b, Slots: w.Slots})
		if b <= a { // wraps midnight
			covered = append(covered, span{a, 1440}, span{0, b})
		} else {
			covered = append(covered, span{a, b})
		}
	}
	sort.Slice(covered, func(i, j int) bool { return covered[i].a < covered[j].a })
	at := 0
	for _, c := range covered {
		if c.a > at {
			cs.Windows = append(cs.Windows, placement.Window{Start: at, End: c.a, Slots: 0})
		}
		at = max(at, c.b)
	}
	if at < 1440 {
		// End 0 is midnight: the window runs to the end of the day.
		cs.Windows = append(cs.Windows, placement.Window{Start: at, End: 0, Slots: 0})
	}
	return cs
}

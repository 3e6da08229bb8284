package costsim

import (
	"container/heap"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ax-sched/ax/placement"
)

// Policy names, in the order results are reported.
const (
	PolicyAx         = "ax"
	PolicyAxFillOnly = "ax-fill-only" // ax without a wait target: price × duration × fill penalty
	PolicyRoundRobin = "round-robin"
	PolicyCheapest   = "cheapest-list-price"
	PolicyHindsight  = "greedy-hindsight"
)

// Policies is every policy, in report order.
var Policies = []string{PolicyAx, PolicyAxFillOnly, PolicyRoundRobin, PolicyCheapest, PolicyHindsight}

// Result is one policy's day.
type Result struct {
	Policy string
	Tasks  int // submissions
	Done   int // runs that finished
	// Cost in USD: the live price at each claim × the run time (lost runs' work included).
	Cost float64
	// Waits from submission to the claim of the run that finished (unfinished tasks: to the end).
	WaitP50, WaitP99, WaitMax time.Duration
	// OnDead counts placements into a region that was down at the decision;
	// OnDeadAfterStale those later than the stale window after it went down.
	OnDead, OnDeadAfterStale int
	// Replaced counts hand-offs the outbox gave up on (dead target) and placed again; Refused
	// counts submissions answered 429 (retried a second later) or left unplaced (retried 2 s
	// later).
	Replaced, Refused int
	// OverTarget counts placements whose expected wait was past the target (ax's least-wait rule).
	OverTarget int
	// Runs per pool ("region/name"), and the CPU runs in the slow spot pool's share.
	ByPool map[string]int
	// ByType breaks the day down by task type.
	ByType map[string]TypeResult
	// Series samples the day every SampleEvery: cumulative cost and tasks queued (ready).
	Series []Sample
}

// TypeResult is one task type's share of a Result.
type TypeResult struct {
	Tasks   int
	Cost    float64
	WaitP99 time.Duration
}

// Sample is one point of a Result's series.
type Sample struct {
	At     time.Duration
	Cost   float64
	Queued int
}

// SampleEvery is the series' step.
const SampleEvery = 5 * time.Minute

// Run replays the scenario's day under each policy (nil: all) with seed.
//
// The ax policy is the real placement package called as a server calls it: each simulated
// server has its own [placement.Placer] (damping included) over snapshots built from figures the
// simulated regions publish the way region leaders do (every second when a figure moved 5 %,
// else every 2 s; live prices, slots, running, ready, capacity windows, the measured drain rate
// from a [placement.DrainMeter], the learnt run times per (pool, type) folded with the formula
// of queue/scripts/lib.lua and set into the servers' estimator on each publication). A region
// that fails stops publishing; its figures stay in the view until its registration's lease
// expires (the stale window), and a hand-off that cannot connect marks the region a suspect
// in the sender's view and is placed again, as federation's outbox does.
//
// The other policies see the same view: round-robin over eligible pools, cheapest list price,
// and a greedy hindsight schedule that knows every task's true duration in every pool, the
// prices of the whole day, the exact state of every queue and which regions are down. Each
// policy replays the same arrivals (same seed) on its own copy of the world, on a simulated
// clock: a day takes a second or two of CPU.
//
// Costs are what the workers would record: the live price per slot-hour at the claim × the
// task's run time. Waits run from submission to claim, hand-offs and re-placements included.
func Run(s *Scenario, seed uint64, policies []string) ([]Result, error) {
	if len(policies) == 0 {
		policies = Policies
	}
	regions := regionsOf(s)
	tasks := arrivals(s, seed, len(regions))
	// Each policy's world is its own; they share only the read-only arrivals and scenario.
	out := make([]Result, len(policies))
	worlds := make([]*world, len(policies))
	for i, name := range policies {
		w, err := newWorld(s, regions, tasks, name)
		if err != nil {
			return nil, err
		}
		worlds[i] = w
	}
	var wg sync.WaitGroup
	for i, w := range worlds {
		wg.Go(func() { out[i] = w.run() })
	}
	wg.Wait()
	return out, nil
}

func regionsOf(s *Scenario) []string {
	var out []string
	for _, p := range s.Pools {
		if !slices.Contains(out, p.Region) {
			out = append(out, p.Region)
		}
	}
	return out
}

// world is one policy's copy of the day.
type world struct {
	s       *Scenario
	start   time.Time
	tasks   []simTask
	pools   []simPool
	regions []simRegion
	policy  policy
	hind    bool // the policy reads the true state (hindsight)

	ev    events
	seq   int
	now   float64
	token int

	// suspect[h][r]: from when until when region r is a suspect in home h's servers' view.
	suspectFrom, suspectUntil [][]float64
	// Cached snapshot per home region, rebuilt when figures or suspects change.
	snaps      []*placement.Snapshot
	snapPools  [][]placement.Pool // the figures each snapshot was built from
	snapIdx    [][]int            // their world pool indexes
	snapValid  []float64          // the snapshot holds until then
	snapStamp  []int              // figures generation it was built from
	generation int
	shared     map[string]*shared // this generation's snapshots by the health they saw
	shareGen   int
	needSnap   bool // the policy places with the placement package

	cfg placement.Config
	est *placement.Estimator

	res        Result
	cost       float64
	typeCost   []float64
	started    []bool
	waits      []float64
	submitted  int
	finished   int
	typeIndex  map[string]int
	wantSample float64
}

// policy chooses a pool for a task submitted through home region h, or -1 when it leaves it
// unplaced for now (retry after the returned delay in seconds).
type policy interface {
	place(w *world, task, home int) (pool int, retry float64)
}

func newWorld(s *Scenario, regions []string, tasks []simTask, name string) (*world, error) {
	w := &world{s: s, start: s.Start, tasks: tasks, res: Result{Policy: name, Tasks: len(tasks), ByPool: map[string]int{},
		ByType: map[string]TypeResult{}}, typeCost: make([]float64, len(s.Types)),
		started: make([]bool, len(tasks)), waits: make([]float64, len(tasks)), typeIndex: map[string]int{}}
	for i := range w.waits {
		w.waits[i] = -1
	}
	for i, t := range s.Types {
		w.typeIndex[t.Name] = i
	}
	w.cfg = placement.DefaultConfig()
	w.cfg.StaleAfter = 15 * time.Second
	w.cfg.MaxWait = s.MaxWait
	if name == PolicyAxFillOnly {
		w.cfg.MaxWait = 0
	}
	var err error
	if w.est, err = placement.NewEstimator(w.cfg); err != nil {
		return nil, err
	}
	for _, r := range regions {
		w.regions = append(w.regions, simRegion{name: r})
	}
	for i := range s.Pools {
		ps := &s.Pools[i]
		ri := slices.Index(regions, ps.Region)
		w.pools = append(w.pools, simPool{spec: ps, key: ps.Region + "/" + ps.Name, region: ri, tags: ps.Tags,
			runs: map[int]run{}, meter: placement.NewDrainMeter(10 * time.Minute), rts: make([]rtStat, len(s.Types)), dirty: true})
		w.regions[ri].pools = append(w.regions[ri].pools, i)
	}
	n := len(regions)
	w.suspectFrom, w.suspectUntil = make([][]float64, n), make([][]float64, n)
	for h := range n {
		w.suspectFrom[h], w.suspectUntil[h] = make([]float64, n), make([]float64, n)
	}
	w.snaps, w.snapValid, w.snapStamp = make([]*placement.Snapshot, n), make([]float64, n), make([]int, n)
	w.snapPools, w.snapIdx = make([][]placement.Pool, n), make([][]int, n)
	switch name {
	case PolicyAx, PolicyAxFillOnly:
		p, err := newAxPolicy(w)
		if err != nil {
			return nil, err
		}
		w.policy, w.needSnap = p, true
	case PolicyRoundRobin:
		w.policy = &roundRobin{}
	case PolicyCheapest:
		w.policy = cheapest{}
	case PolicyHindsight:
		w.policy, w.hind = hindsight{}, true
	default:
		return nil, fmt.Errorf("costsim: unknown policy %q (want one of %v)", name, Policies)
	}
	for i := range tasks {
		w.push(tasks[i].arrival, evArrive, i, 0)
	}
	for _, f := range s.Failures {
		ri := slices.Index(regions, f.Region)
		if ri < 0 {
			return nil, fmt.Errorf("costsim: failure of unknown region %q", f.Region)
		}
		w.push(f.From.Seconds(), evFail, ri, 0)
		w.push(f.To.Seconds(), evRecover, ri, 0)
	}
	w.push(0, evTick, 0, 0)
	return w, nil
}

func (w *world) push(at float64, kind, a, b int) {
	w.seq++
	heap.Push(&w.ev, event{at: at, seq: w.seq, kind: kind, a: a, b: b})
}

func (w *world) at(sec float64) time.Time {
	return w.start.Add(time.Duration(sec * float64(time.Second)))
}

// price is pool i's live price per slot-hour at sec (after discount, swings applied).
func (w *world) price(i int, sec float64) float64 {
	p := &w.pools[i]
	f := 1.0
	tod := math.Mod(sec, 86400)
	for _, sw := range w.s.Prices {
		if sw.Pool == p.key && tod >= sw.From.Seconds() && tod < sw.To.Seconds() {
			f *= sw.Factor
		}
	}
	return p.spec.Price * (1 - p.spec.Discount) * f
}

// duration is task k's true run time in pool i, seconds.
func (w *world) duration(k, i int) float64 {
	t := &w.tasks[k]
	sp := w.pools[i].spec
	speed := sp.Speed
	if v, ok := sp.SpeedOf[w.s.Types[t.typ].Name]; ok {
		speed = v
	}
	if speed <= 0 {
		speed = 1
	}
	return t.base * speed
}

func (w *world) slotsAt(i int, sec float64) int {
	p := w.pools[i].spec
	n, _ := p.Window.SlotsAt(w.at(sec), p.Slots)
	return n
}

func (w *world) matches(k, i int) bool {
	for key, v := range w.s.Types[w.tasks[k].typ].Tags {
		if w.pools[i].tags[key] != v {
			return false
		}
	}
	return true
}

func (w *world) run() Result {
	end := (w.s.Length + w.s.Drain).Seconds()
	for w.ev.Len() > 0 {
		e := heap.Pop(&w.ev).(event)
		if e.at > end {
			break
		}
		w.now = e.at
		switch e.kind {
		case evArrive:
			w.submit(e.a)
		case evLand:
			w.land(e.a, e.b)
		case evRefused:
			w.res.Replaced++
			w.submit(e.a)
		case evFinish:
			w.finish(e.a, e.b)
		case evTick:
			w.tick()
			if w.finished < len(w.tasks) || w.now < w.s.Length.Seconds() {
				w.push(w.now+1, evTick, 0, 0)
			}
		case evFail:
			w.fail(e.a)
		case evRecover:
			r := &w.regions[e.a]
			r.down, r.backAt = false, w.now
			for _, i := range r.pools {
				w.pools[i].dirty = true
				w.dispatch(i)
			}
		}
	}
	for k := range w.tasks {
		if w.waits[k] < 0 {
			w.waits[k] = w.now - w.tasks[k].arrival
		}
	}
	w.sample()
	ws := slices.Clone(w.waits)
	sort.Float64s(ws)
	w.res.Cost = w.cost
	w.res.WaitP50, w.res.WaitP99, w.res.WaitMax = pct(ws, 0.5), pct(ws, 0.99), pct(ws, 1)
	byType := make([][]float64, len(w.s.Types))
	for k, t := range w.tasks {
		byType[t.typ] = append(byType[t.typ], w.waits[k])
	}
	for ti, tw := range byType {
		sort.Float64s(tw)
		w.res.ByType[w.s.Types[ti].Name] = TypeResult{Tasks: len(tw), Cost: w.typeCost[ti], WaitP99: pct(tw, 0.99)}
	}
	w.res.Done = w.finished
	return w.res
}

// submit places task k through a live home region's server.
func (w *world) submit(k int) {
	h := w.tasks[k].home
	for i := range w.regions {
		// A submitter reaches another region's servers when its own is down.
		if r := (h + i) % len(w.regions); !w.regions[r].down {
			h = r
			break
		}
	}
	i, retry := w.policy.place(w, k, h)
	if i < 0 {
		w.res.Refused++
		w.push(w.now+retry, evArrive, k, 0)
		return
	}
	r := w.pools[i].region
	if w.regions[r].down {
		w.res.OnDead++
		if w.now > w.regions[r].downAt+w.s.StaleWindow.Seconds() {
			w.res.OnDeadAfterStale++
		}
		// The outbox cannot connect: the region turns suspect in this home's view, and the
		// task is placed again once the sender gives up on it.
		if w.suspectUntil[h][r] < w.now {
			w.suspectFrom[h][r] = w.now + w.s.Dial.Seconds()
		}
		w.suspectUntil[h][r] = w.now + w.s.Dial.Seconds() + w.cfg.StaleAfter.Seconds()
		w.snapValid[h] = min(w.snapValid[h], w.suspectFrom[h][r])
		w.push(w.now+w.s.RefuseAfter.Seconds(), evRefused, k, 0)
		return
	}
	if r == h || w.hind {
		w.land(k, i)
		return
	}
	w.push(w.now+w.s.HandOff.Seconds(), evLand, k, i)
}

func (w *world) land(k, i int) {
	p := &w.pools[i]
	if w.regions[p.region].down {
		// Landed as the region went: it is the dead region's own now, run when it is back.
		p.push(k)
		p.dirty = true
		return
	}
	if w.hind && !p.dirty && p.spec.Window == nil {
		start := max(w.now, p.proj[0])
		p.proj[0] = start + w.duration(k, i)
		heap.Fix(&p.proj, 0)
	}
	p.push(k)
	w.dispatch(i)
}

// dispatch claims queued tasks of pool i into its free slots.
func (w *world) dispatch(i int) {
	p := &w.pools[i]
	if w.regions[p.region].down {
		return
	}
	slots := w.slotsAt(i, w.now)
	for len(p.runs) < slots && p.queued() > 0 {
		k := p.pop()
		w.token++
		pr := w.price(i, w.now)
		p.runs[w.token] = run{task: k, start: w.now, price: pr}
		w.waits[k] = w.now - w.tasks[k].arrival
		w.push(w.now+w.duration(k, i), evFinish, i, w.token)
	}
}

func (w *world) finish(i, token int) {
	p := &w.pools[i]
	r, ok := p.runs[token]
	if !ok {
		return // lost with its region
	}
	delete(p.runs, token)
	d := w.now - r.start
	w.cost += r.price * d / 3600
	w.typeCost[w.tasks[r.task].typ] += r.price * d / 3600
	p.done++
	p.rts[w.tasks[r.task].typ].fold(d)
	w.finished++
	w.res.ByPool[p.key]++
	w.dispatch(i)
}

// fail takes region ri down: running tasks are lost (their work so far is billed) and queued
// again at the head, to run when the region is back.
func (w *world) fail(ri int) {
	r := &w.regions[ri]
	r.down, r.downAt = true, w.now
	for _, i := range r.pools {
		p := &w.pools[i]
		var lost []int
		for _, tok := range slices.Sorted(maps.Keys(p.runs)) {
			run := p.runs[tok]
			w.cost += run.price * (w.now - run.start) / 3600
			w.typeCost[w.tasks[run.task].typ] += run.price * (w.now - run.start) / 3600
			lost = append(lost, run.task)
			w.waits[run.task] = -1
		}
		clear(p.runs)
		p.pushFront(lost)
		p.dirty = true
	}
}

// tick is the second's housekeeping: leaders read their figures (drain meters) and publish
// them on a 5 % move or every 2 s; pools claim into slots a window opened; the series samples.
func (w *world) tick() {
	for ri := range w.regions {
		r := &w.regions[ri]
		if r.down {
			continue
		}
		figs := make([]placement.Pool, len(r.pools))
		for j, i := range r.pools {
			p := &w.pools[i]
			w.dispatch(i)
			figs[j] = placement.Pool{
				Region: r.name, Name: p.spec.Name, Tags: p.tags, Slots: p.spec.Slots, Running: len(p.runs),
				Ready: p.queued(), QueueCapacity: p.spec.QueueCapacity, PricePerSlotHour: w.price(i, w.now) / (1 - p.spec.Discount),
				Spot: p.spec.Spot, Discount: p.spec.Discount, Window: p.spec.Window, UpdatedAt: w.at(w.now),
				RegionHealthy: true, DrainRate: p.meter.Observe(w.at(w.now), p.done, len(p.runs), p.spec.Slots),
				MaxWait: p.spec.MaxWait,
			}
		}
		if !r.published || w.now-r.pubAt >= 2 || movedFigures(r.figs, figs) {
			r.figs, r.pubAt, r.published = figs, w.now, true
			w.generation++
			w.teach(r)
		}
	}
	if w.now >= w.wantSample {
		w.sample()
		w.wantSample += SampleEvery.Seconds()
	}
}

// teach sets the region's learnt run times into the servers' estimator, as a view does with
// each publication (every type here: fewer than the 32 a leader publishes per pool).
func (w *world) teach(r *simRegion) {
	for _, i := range r.pools {
		p := &w.pools[i]
		for ti, rt := range p.rts {
			if rt.n > 0 {
				w.est.Set("", w.s.Types[ti].Name, p.key, placement.Estimate{
					Mean: time.Duration(rt.mean) * time.Millisecond, Spread: time.Duration(rt.sd) * time.Millisecond, Count: rt.n})
			}
		}
	}
}

// movedFigures is region.moved: a count moved by more than 5 % or from or to zero, or a price
// changed.
func movedFigures(a, b []placement.Pool) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if a[i].PricePerSlotHour != b[i].PricePerSlotHour {
			return true
		}
		for _, pair := range [][2]int{{a[i].Slots, b[i].Slots}, {a[i].Running, b[i].Running}, {a[i].Ready, b[i].Ready}} {
			x, y := float64(pair[0]), float64(pair[1])
			if (x == 0) != (y == 0) || math.Abs(x-y) > 0.05*max(x, y) {
				return true
			}
		}
	}
	return false
}

func (w *world) sample() {
	q := 0
	for i := range w.pools {
		q += w.pools[i].queued()
	}
	w.res.Series = append(w.res.Series, Sample{At: time.Duration(w.now * float64(time.Second)), Cost: w.cost, Queued: q})
}

// snapshot is what home region h's servers see now: every region whose registration is still
// there (up, or down for less than the stale window) with its last figures, suspects and
// regions back for less than the health grace marked unhealthy.
func (w *world) snapshot(h int) (*placement.Snapshot, error) {
	if w.snapPools[h] != nil && w.snapStamp[h] == w.generation && w.now < w.snapValid[h] {
		return w.snaps[h], nil
	}
	valid := math.Inf(1)
	var pools []placement.Pool
	var idx []int
	for ri := range w.regions {
		r := &w.regions[ri]
		if !r.published {
			continue
		}
		if r.down {
			gone := r.downAt + w.s.StaleWindow.Seconds()
			if w.now >= gone {
				continue
			}
			valid = min(valid, gone)
		}
		healthy := true
		if from, until := w.suspectFrom[h][ri], w.suspectUntil[h][ri]; w.now < until {
			if w.now >= from {
				healthy = false
				valid = min(valid, until)
			} else {
				valid = min(valid, from)
			}
		}
		if r.backAt > 0 && w.now < r.backAt+unhealthyGrace {
			healthy = false
			valid = min(valid, r.backAt+unhealthyGrace)
		}
		for j, f := range r.figs {
			f.RegionHealthy = healthy
			pools = append(pools, f)
			idx = append(idx, r.pools[j])
		}
	}
	// Homes that see the same figures with the same health share one snapshot.
	sig := ""
	for _, f := range pools {
		if f.RegionHealthy {
			sig += "+"
		} else {
			sig += "-"
		}
	}
	if w.shareGen != w.generation {
		w.shared, w.shareGen = map[string]*shared{}, w.generation
	}
	sh, ok := w.shared[sig]
	if !ok {
		sh = &shared{pools: pools, idx: idx}
		w.shared[sig] = sh
	}
	if sh.snap == nil && w.needSnap {
		s, err := placement.NewSnapshot(w.cfg, pools)
		if err != nil {
			return nil, err
		}
		sh.snap = s.WithServers(len(w.regions) * max(1, w.s.ServersPerRegion))
	}
	w.snaps[h], w.snapStamp[h], w.snapValid[h] = sh.snap, w.generation, valid
	w.snapPools[h], w.snapIdx[h] = sh.pools, sh.idx
	return sh.snap, nil
}

// shared is one snapshot and the figures it was built from.
type shared struct {
	snap  *placement.Snapshot
	pools []placement.Pool
	idx   []int
}

// pct is the q-quantile (nearest rank) of sorted waits in seconds.
func pct(ws []float64, q float64) time.Duration {
	if len(ws) == 0 {
		return 0
	}
	return time.Duration(ws[max(0, min(len(ws)-1, int(math.Ceil(q*float64(len(ws))))-1))] * float64(time.Second))
}

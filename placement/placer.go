package placement

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Placer places tasks for one server. It is safe for concurrent use; keep one per server.
//
// Counting: between two publications of a pool's figures, the Placer counts its own placements
// into that pool, so its fill, headroom and expected wait include them until the published Ready
// does. The count restarts when a snapshot brings newer figures (a later UpdatedAt) for that
// pool; by then the published Ready includes what this server queued.
//
// Damping (herd protection): a pool that has just become attractive to every server at once —
// new in the view, back from unhealthy or stale, given slots again, or cheaper than in the
// previous snapshot — is damped until its next figures: its count is taken as if every one of
// the servers (the snapshot's count of registered servers, else Config.Servers) had placed as
// many (N × own), which is claiming only 1/N of its headroom, so N servers do not all pour into
// it on the same stale figures. Other pools are not damped: a burst through one server fills the
// cheapest pool up to the line its region's admission holds (the hard watermark), and what several
// servers overshoot together is refused atomically by the region's store and spills.
type Placer struct {
	cfg          Config
	est          *Estimator
	defaultHours float64

	mu  sync.Mutex // serialises switching to another snapshot
	cur atomic.Pointer[state]
}

// state is the Placer's damping and filter cache for one snapshot.
type state struct {
	snap *Snapshot
	// ordered: the snapshot is sorted by this Placer's penalty curve, so a walk may stop early.
	ordered bool
	// placed[i] counts this server's placements into pool i since the figures of figuresAt[i].
	placed    []atomic.Int64
	figuresAt []time.Time
	// herd marks the pools damped ×servers until their next figures (see Placer).
	herd bitset
	view atomic.Pointer[view]

	tablesMu sync.Mutex                              // serialises writers of tables
	tables   atomic.Pointer[map[tableKey]*durations] // per tenant and task type; copied on write
	// The previous state's tables, and for each pool its index there (-1: new), so tables still
	// fresh are carried over instead of reread from the Estimator.
	prevTables map[tableKey]*durations
	remap      []int32
}

// maxTables bounds the duration tables a state keeps; past it they are dropped and reread.
const maxTables = 1024

// view holds what the filters say at a given time, independently of any task: health, staleness,
// capacity windows, live slots. It holds for from <= now < until (Unix ns), until the next pool
// turns stale or the next minute (a window edge) begins.
type view struct {
	from, until int64
	avail       bitset   // pools that pass those filters
	reason      []reason // why the others do not
	room        []room
	// saturated marks pools found saturated. Within a view headroom is fixed and counts only
	// grow, so a set bit stays true; a clear bit only means "not known", and the score decides.
	saturated []atomic.Uint64
	// paused marks available pools whose low priorities backpressure holds (Pool.Paused).
	paused bitset
}

// lowHeld reports whether backpressure's pause applies to t: priorities 3–4, not critical.
func lowHeld(t *Task) bool { return t.Priority >= 3 && !t.Critical }

// room is what a pool can take now, counting every server.
type room struct {
	free int64 // free slots: slots − running
	// headroom is how many more tasks the pool takes before the hard watermark: free slots
	// (they start at once) plus the queue up to ⌊capacity × hard⌋.
	headroom int64
	slots    int64 // slots now (a capacity window's, else the base)
}

var emptySnapshot = &Snapshot{}

// NewPlacer returns a Placer using cfg and the duration estimates of est (nil: always the default).
func NewPlacer(cfg Config, est *Estimator) (*Placer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Placer{cfg: cfg, est: est, defaultHours: cfg.DefaultDuration.Hours()}, nil
}

// Place chooses a pool for t in s at now and counts the placement for damping.
//
// A decision runs four steps. Filter: a pool must carry every tag of the task, sit in an allowed
// region whose figures are healthy and fresher than [Config.StaleAfter], have live slots (or scale
// from zero), be inside a capacity window that grants slots, and not be saturated; each rejected
// pool keeps a [Reason]. Score: expected cost in USD = effective price per slot-hour × expected
// duration of this task type in that pool (learnt from completions and kept by an [Estimator]; a
// pool without one takes the type's estimate in the other pools, then [Config.DefaultDuration]) ×
// a watermark penalty — 1 below the hard (spill) queue fill, [Config.PenaltyMax] at and above it,
// where only critical tasks go — plus an optional cross-region penalty; lowest wins, ties go to
// the pool with the lower published cost, then region, then name. Damping: a [Placer] counts its own placements into each pool's figures until
// that pool's next published figures arrive; a pool that has just become attractive to every
// server at once (new, back from unhealthy or stale, slots back, price dropped) is damped until
// then — each server claims only its share of its headroom (headroom ÷ [Config.Servers]) — so
// the servers do not all pour into it on the same figures (karmada-io/karmada#6518 is that failure).
// Other pools are not damped: whether a pool can take a task is its region's admission's call.
// Explain: [Placer.Explain] runs the same evaluation as [Placer.Place] and keeps every pool's reason and score parts, without counting a
// placement.
//
// A failed decision says why: [Decision.Unplaceable] (no pool could ever match, HTTP 422),
// [Decision.AllSaturated] (every matching pool is saturated, HTTP 429 with Retry-After), or neither
// (nothing fits now; the task stays PENDING with NO_CAPACITY). [Decision.Err] returns the matching
// sentinel.
//
// It does not allocate, except on the first call with a new snapshot, when a pool changes state (turns stale,
// a capacity window's minute passes) and when it rereads the estimates of t's type.
//
// Concurrent calls may overshoot a pool's headroom by at most the number of callers racing for
// its last slot, and a placement racing a switch to another snapshot may go uncounted; both are
// corrected by the next published figures.
func (p *Placer) Place(s *Snapshot, t Task, now time.Time) Decision {
	st := p.state(s)
	d, i := p.evaluate(st, &t, now, nil)
	if d.OK {
		st.placed[i].Add(1)
	}
	return d
}

// Explain runs the same evaluation as Place and returns every pool's reason and score parts. It
// counts nothing, so Place called next with the same arguments chooses the same pool.
func (p *Placer) Explain(s *Snapshot, t Task, now time.Time) Explanation {
	st := p.state(s)
	exp := Explanation{Candidates: make([]Candidate, len(st.snap.pools))}
	exp.Decision, _ = p.evaluate(st, &t, now, &exp)
	p.describe(st.snap, &t, now, &exp)
	return exp
}

// state returns the Placer's state for s, carrying the damping counts over from the previous
// snapshot for pools whose figures did not advance. Alternating between two snapshots works but
// pays this switch each time.
func (p *Placer) state(s *Snapshot) *state {
	if s == nil {
		s = emptySnapshot
	}
	if st := p.cur.Load(); st != nil && st.snap == s {
		return st
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.cur.Load()
	if old != nil && old.snap == s {
		return old
	}
	st := &state{
		snap: s, ordered: s.curve == curveOf(&p.cfg),
		placed: make([]atomic.Int64, len(s.pools)), figuresAt: make([]time.Time, len(s.pools)),
		herd: make(bitset, s.words),
	}
	if old != nil {
		if m := old.tables.Load(); m != nil {
			st.prevTables, st.remap = *m, make([]int32, len(s.pools))
		}
	}
	for i := range s.pools {
		e := &s.pools[i]
		st.figuresAt[i] = e.pool.UpdatedAt
		if st.remap != nil {
			st.remap[i] = -1
		}
		if old == nil {
			continue
		}
		j, ok := old.snap.byKey[e.key]
		if !ok {
			// New to the view (a region registering or returning): every server sees it at once.
			st.herd.set(i)
			continue
		}
		if st.remap != nil {
			st.remap[i] = int32(j)
		}
		if p.returned(&old.snap.pools[j], e) {
			st.herd.set(i)
		}
		if !e.pool.UpdatedAt.After(old.figuresAt[j]) {
			st.placed[i].Store(old.placed[j].Load())
			st.figuresAt[i] = old.figuresAt[j]
			if old.herd.has(j) {
				st.herd.set(i)
			}
		}
	}
	p.cur.Store(st)
	return st
}

// returned reports whether pool e, compared with its previous entry was, has just become
// attractive to every server at once: its region turned healthy, its figures resumed after a
// gap longer than StaleAfter (it was stale), its slots came back, or its price dropped.
// The gap is the one between e's figures and the ones published just before them
// (PrevUpdatedAt, when known), not the time since was's: a server that placed nothing into
// the pool for longer than StaleAfter while its figures kept coming must not take it for
// back from stale.
func (p *Placer) returned(was, e *entry) bool {
	a, b := was.pool, e.pool
	prev := a.UpdatedAt
	if b.PrevUpdatedAt.After(prev) {
		prev = b.PrevUpdatedAt
	}
	return !a.RegionHealthy && b.RegionHealthy ||
		b.UpdatedAt.Sub(prev) > p.cfg.StaleAfter ||
		a.Slots == 0 && b.Slots > 0 ||
		e.price < was.price
}

func (p *Placer) view(st *state, now time.Time) *view {
	n := now.UnixNano()
	if v := st.view.Load(); v != nil && v.from <= n && n < v.until {
		return v
	}
	v := p.buildView(st.snap, now)
	st.view.Store(v)
	return v
}

func (p *Placer) buildView(s *Snapshot, now time.Time) *view {
	n := len(s.pools)
	v := &view{
		from: now.UnixNano(), until: math.MaxInt64,
		avail: make(bitset, s.words), reason: make([]reason, n),
		room: make([]room, n), saturated: make([]atomic.Uint64, s.words),
		paused: make(bitset, s.words),
	}
	// Window slots change only when the local minute does (zone offsets are whole minutes).
	nextMinute := nanos(now.Truncate(time.Minute).Add(time.Minute))
	for i := range s.pools {
		pl := s.pools[i].pool
		freshUntil := pl.UpdatedAt.Add(p.cfg.StaleAfter)
		switch {
		case !pl.RegionHealthy:
			v.reason[i] = rUnhealthy
			continue
		case pl.Local:
		case now.After(freshUntil):
			v.reason[i] = rStale
			continue
		default:
			v.until = min(v.until, nanos(freshUntil)+1)
		}
		if pl.Window != nil {
			v.until = min(v.until, nextMinute)
		}
		slots, inWindow := pl.Window.SlotsAt(now, pl.Slots)
		switch {
		case inWindow && slots == 0:
			v.reason[i] = rWindow
			continue
		case slots == 0 && !pl.ScaleFromZero:
			v.reason[i] = rNoSlots
			continue
		}
		v.avail.set(i)
		if pl.Paused {
			v.paused.set(i)
		}
		// The small epsilon keeps e.g. 1000 × 0.95 at 950 despite binary rounding.
		hardCap := int64(math.Floor(float64(pl.QueueCapacity)*p.cfg.HardWatermark + 1e-9))
		free := int64(max(0, math.Floor(float64(slots)-pl.busy()+1e-9)))
		v.room[i] = room{free: free, headroom: max(0, hardCap-int64(pl.Ready)) + free, slots: int64(slots)}
	}
	return v
}

// nanos is t.UnixNano clamped to the int64 range.
func nanos(t time.Time) int64 {
	switch {
	case !t.Before(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	}
	return t.UnixNano()
}

// durations returns the duration table of tenant's typ for st, rereading the estimator when it
// changed and the table is older than Config.EstimateRefresh; nil without an estimator.
func (p *Placer) durations(st *state, tenant, typ string, now time.Time) *durations {
	if p.est == nil {
		return nil
	}
	n := now.UnixNano()
	fresh := func(d *durations) bool {
		return d != nil && (d.version == p.est.version.Load() ||
			(n >= d.builtAt && n-d.builtAt < int64(p.cfg.EstimateRefresh)))
	}
	k := tableKey{tenant, typ}
	var tables map[tableKey]*durations
	if m := st.tables.Load(); m != nil {
		tables = *m
	}
	if d := tables[k]; fresh(d) {
		return d
	}
	st.tablesMu.Lock()
	defer st.tablesMu.Unlock()
	if m := st.tables.Load(); m != nil {
		tables = *m
	}
	if d := tables[k]; fresh(d) {
		return d
	}
	var d *durations
	if prev := st.prevTables[k]; fresh(prev) {
		d = p.est.carry(prev, st.remap, k, st.snap, p.defaultHours)
	} else {
		d = p.est.table(k, st.snap, p.defaultHours, n)
	}
	next := make(map[tableKey]*durations, len(tables)+1)
	if len(tables) < maxTables {
		for k, v := range tables {
			next[k] = v
		}
	}
	next[k] = d
	st.tables.Store(&next)
	return d
}

// query is one task resolved against one state.
type query struct {
	p    *Placer
	st   *state
	v    *view
	t    *Task
	durs *durations // nil: every duration is the default
	home int32      // region number of t.Home; noHome, or foreignHome when no pool is in it
}

const (
	noHome      int32 = -1
	foreignHome int32 = -2
)

// parts is one pool's score.
type parts struct {
	hours     float64
	base      float64
	fill      float64
	penalty   float64
	cross     float64
	cost      float64
	saturated bool
	ahead     int64   // tasks ahead of this one (< 0: a slot is free)
	rate      float64 // drain rate used, tasks per second
	src       WaitSource
	wait      float64 // expected wait, seconds
	target    float64 // wait target, seconds; 0: none
	over      bool    // wait > target
}

// score prices pool i for the task.
func (q *query) score(i int) (sc parts) {
	e := &q.st.snap.pools[i]
	cfg := &q.p.cfg
	sc.hours = q.p.defaultHours
	if q.durs != nil {
		sc.hours = q.durs.hours[i]
	}
	sc.base = e.price * sc.hours

	absorbed := q.st.placed[i].Load()
	if q.st.herd.has(i) {
		servers := q.st.snap.servers
		if servers < 1 {
			servers = cfg.Servers
		}
		absorbed *= int64(servers)
	}
	sc.saturated = absorbed >= q.v.room[i].headroom
	sc.fill = fill(e.ready+max(0, absorbed-q.v.room[i].free), e.queue)
	sc.penalty = cfg.penalty(sc.fill)
	if sc.saturated {
		sc.penalty = cfg.PenaltyMax
		q.v.saturated[i>>6].Or(1 << (i & 63))
	}
	if q.home != noHome && e.region != q.home {
		sc.cross = cfg.CrossRegionPenalty
	}
	// price × penalty first, as the snapshot's sort key is, so the walk's bound never exceeds a
	// score by rounding.
	sc.cost = e.price*sc.penalty*sc.hours + sc.cross
	q.wait(i, e, absorbed, &sc)
	return sc
}

// wait sets the expected wait of the task in pool i: the tasks that will start before it (the
// queue, plus what this server placed there since its figures, minus the free slots that take
// them at once) ÷ the rate the pool finishes tasks at while its slots are busy. The measured
// rate (DrainMeter) reflects the mix of types the pool runs; without one, the pool's slots each
// running this type stand in for it.
func (q *query) wait(i int, e *entry, absorbed int64, sc *parts) {
	r := &q.v.room[i]
	sc.target = e.maxWait
	if sc.target <= 0 {
		sc.target = q.p.cfg.MaxWait.Seconds()
	}
	sc.target = tighter(q.t.MaxWait.Seconds(), sc.target)
	sc.ahead = e.ready + absorbed - r.free
	switch {
	case sc.ahead < 0:
		sc.src, sc.rate, sc.wait = WaitFreeSlot, e.drain, 0
	case e.drain > 0:
		// The rate was measured against the pool's live slots; a capacity window grants some.
		sc.src, sc.rate = WaitMeasured, e.drain
		if base := int64(e.pool.Slots); base > 0 && r.slots != base {
			sc.rate = e.drain * float64(r.slots) / float64(base)
		}
		sc.wait = float64(sc.ahead+1) / sc.rate
	default:
		// A pool scaling from zero has no slots yet: as if one slot ran the queue.
		sc.src, sc.rate = WaitSlots, float64(max(r.slots, 1))/(sc.hours*3600)
		sc.wait = float64(sc.ahead+1) / sc.rate
	}
	sc.over = sc.target > 0 && sc.wait > sc.target
}

// tighter is the smaller of two wait targets, 0 meaning none.
func tighter(a, b float64) float64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// lessWait reports whether pool i (wait, cost) beats pool best as the least-wait fallback: less
// wait, then less cost, then snapshot order.
func lessWait(i int, wait, cost float64, best int, bestWait, bestCost float64) bool {
	return best < 0 || wait < bestWait || (wait == bestWait && better(i, cost, best, bestCost))
}

// better reports whether pool i at cost beats pool best at bestCost. Ties go to the pool first in
// snapshot order: lower published cost, then region, then name. Every server holding the same
// figures makes the same choice, and the walk can stop at a tie, since every later pool loses it.
func better(i int, cost float64, best int, bestCost float64) bool {
	return best < 0 || cost < bestCost || (cost == bestCost && i < best)
}

// beyond reports whether pool i, whose score is at least bound, cannot beat pool best at bestCost.
func beyond(i int, bound float64, best int, bestCost float64) bool {
	return best >= 0 && (bound > bestCost || (bound == bestCost && i > best))
}

// evaluate is the one decision procedure behind Place and Explain. With exp nil it visits only the
// pools that pass the task-independent filters, carry the task's tags and are not known to be
// saturated, in the snapshot's order, and stops once a pool's published cost × the type's
// shortest duration cannot beat the best score. With exp set it visits every pool, records why
// each was rejected and how each eligible one scored, and skips nothing; the same bitsets, score
// and comparison decide. It returns the decision and the chosen pool's snapshot index (-1: none).
func (p *Placer) evaluate(st *state, t *Task, now time.Time, exp *Explanation) (Decision, int) {
	q := query{p: p, st: st, v: p.view(st, now), t: t, durs: p.durations(st, t.Tenant, t.Type, now), home: homeOf(st.snap, t)}
	// Room for the filter's bitsets on the stack, so Place does not allocate for them.
	var tagBuf [8]bitset
	var regBuf [4]uint64
	f := q.filter(tagBuf[:0], regBuf[:])
	var c choice
	if exp == nil {
		c = q.search(&f)
	} else {
		c = q.explain(&f, exp)
	}
	return c.decide(st.snap, exp)
}

// homeOf is the region number of t's home: noHome when it has none, foreignHome when no pool of
// the snapshot is in it.
func homeOf(s *Snapshot, t *Task) int32 {
	if t.Home == "" {
		return noHome
	}
	if ri, ok := s.regions[t.Home]; ok {
		return ri
	}
	return foreignHome
}

// filter is what the task asks of a pool beyond the view's filters: its tags, its regions and a
// live handler for its type.
type filter struct {
	tags    []bitset // the bitsets of the task's tag pairs; a pool must be in all
	tagMiss bool     // a tag pair no pool has: no pool matches
	regions bitset   // region numbers allowed; nil: every region
	serving bitset   // pools whose live workers serve the type; nil: every pool
	closed  bitset   // pools that are other tenants' own; nil: none
}

// filter resolves the task's filters against the snapshot, keeping the tag bitsets in tagBuf and
// the region set in regBuf when they fit.
func (q *query) filter(tagBuf []bitset, regBuf []uint64) filter {
	s, t := q.st.snap, q.t
	f := filter{tags: tagBuf, serving: s.serving(t.Type), closed: s.closedTo(t.Tenant)}
	// Tag filter: the AND of the bitsets of the task's tag pairs; a pair no pool has matches none.
	for k, val := range t.Tags {
		bs, ok := s.tags[tagPair{k, val}]
		if !ok {
			f.tagMiss = true
			break
		}
		f.tags = append(f.tags, bs)
	}
	// Region filter, as a set of region numbers; nil allows every region.
	if len(t.Regions) > 0 {
		if w := (len(s.regions) + 63) / 64; w <= len(regBuf) {
			f.regions = regBuf[:w]
		} else {
			f.regions = make(bitset, w)
		}
		for _, r := range t.Regions {
			if ri, ok := s.regions[r]; ok {
				f.regions.set(int(ri))
			}
		}
	}
	return f
}

// matches reports whether pool i carries the task's tags and is in one of its regions.
func (f *filter) matches(s *Snapshot, i int) bool {
	return !f.tagMiss && hasAll(f.tags, i) && (f.closed == nil || !f.closed.has(i)) &&
		(f.regions == nil || f.regions.has(int(s.pools[i].region)))
}

// choice is what an evaluation found: the cheapest pool within its wait target, the least-wait
// pool past its target, and the counts that tell why nothing was chosen.
type choice struct {
	best     int // -1: none
	bestCost float64
	bestWait float64
	bestBase float64  // its base cost (price × expected duration)
	fb       fallback // the least-wait pool past its target
	// targeted: some eligible pool had a wait target (set by Explain only).
	targeted            bool
	matching, saturated int
	// served counts the matching pools that may run the type (filter.serves),
	// denied those whose live workers serve other types (NO_HANDLER).
	served, denied int
}

// serves says whether pool i may run the filter's type: its live workers
// serve it, or its types are not known and it has live slots (or scales
// from zero). A pool with no live worker serves no type.
func (f *filter) serves(s *Snapshot, i int) bool {
	if f.serving != nil && !f.serving.has(i) {
		return false
	}
	p := s.pools[i].pool
	return p.Slots > 0 || p.ScaleFromZero || (f.serving != nil && p.Types != nil)
}

// countServing counts matching pool i in served or denied.
func (c *choice) countServing(f *filter, s *Snapshot, i int) {
	switch {
	case f.serves(s, i):
		c.served++
	case f.serving != nil && !f.serving.has(i):
		c.denied++
	}
}

func noChoice() choice { return choice{best: -1, fb: fallback{best: -1}} }

// search is Place's evaluation: the walk over the candidates, cheapest bound first.
func (q *query) search(f *filter) choice {
	if f.tagMiss {
		return noChoice()
	}
	w := walk{q: q, filter: *f, floor: q.floor(), choice: noChoice()}
	s := q.st.snap
	switch cross := q.p.cfg.CrossRegionPenalty; {
	case q.home >= 0 && cross > 0:
		// Home pools and foreign ones are each in cost order but differ by the penalty:
		// walk them apart so each walk can stop early.
		w.run(s.inRegion[q.home], false, 0)
		w.run(s.inRegion[q.home], true, cross)
	case q.home == foreignHome:
		w.run(nil, false, cross)
	default:
		w.run(nil, false, 0)
	}
	if w.best < 0 {
		// Nothing chosen, so nothing was cut short: every available matching pool was
		// visited, or known, saturated. Count the matching ones to tell why.
		for i := range s.pools {
			if f.matches(s, i) {
				w.matching++
				w.countServing(f, s, i)
				if q.v.avail.has(i) && (f.serving == nil || f.serving.has(i)) {
					w.saturated++
				}
			}
		}
	}
	return w.choice
}

// floor is the task type's shortest duration over the pools, hours.
func (q *query) floor() float64 {
	if q.durs != nil {
		return q.durs.floor
	}
	return q.p.defaultHours
}

// explain is Explain's evaluation: every pool visited, its reason and score parts recorded in exp.
func (q *query) explain(f *filter, exp *Explanation) choice {
	c := noChoice()
	s := q.st.snap
	for i := range s.pools {
		e := &s.pools[i]
		cd := &exp.Candidates[e.input]
		cd.Region, cd.Pool, cd.Index, cd.Price = e.pool.Region, e.pool.Name, e.input, e.price
		r := rNone
		switch {
		case f.tagMiss || !hasAll(f.tags, i):
			r = rTagMismatch
		case f.closed != nil && f.closed.has(i):
			r = rTenantPool
		case f.regions != nil && !f.regions.has(int(e.region)):
			r = rRegionExcluded
		default:
			c.matching++
			c.countServing(f, s, i)
			r = q.v.reason[i]
			if r == rNone && f.serving != nil && !f.serving.has(i) {
				r = rNoHandler
			}
		}
		if r == rNone {
			sc := q.score(i)
			q.describeScore(cd, i, &sc)
			r = c.offer(q, i, &sc)
		}
		cd.Reason = reasonNames[r]
	}
	return c
}

// describeScore records pool i's score parts in its candidate.
func (q *query) describeScore(c *Candidate, i int, sc *parts) {
	c.Duration, c.DurationSource = time.Duration(sc.hours*float64(time.Hour)), SourceDefault
	if q.durs != nil {
		c.DurationSource, c.Observations = q.durs.source(i), q.durs.count[i]
		c.Spread = time.Duration(q.durs.spread[i] * float64(time.Hour))
	}
	c.DurationKnown = c.DurationSource == SourceLearnt
	c.BaseCost, c.Fill, c.Penalty, c.CrossRegion, c.Cost = sc.base, sc.fill, sc.penalty, sc.cross, sc.cost
	c.Wait, c.Ahead, c.DrainRate, c.WaitSource = seconds(sc.wait), sc.ahead, sc.rate, sc.src
	c.WaitTarget, c.OverTarget = seconds(sc.target), sc.over
}

// offer ranks an eligible pool i by its score: saturated (or paused, for a low priority) it is
// rejected with rSaturated; past its wait target it is a fallback; otherwise it competes on cost.
func (c *choice) offer(q *query, i int, sc *parts) reason {
	switch {
	case sc.saturated && !q.t.Critical || lowHeld(q.t) && q.v.paused.has(i):
		c.saturated++
		return rSaturated
	case sc.over:
		c.targeted = true
		c.fb.offer(i, sc)
	default:
		c.targeted = c.targeted || sc.target > 0
		if better(i, sc.cost, c.best, c.bestCost) {
			c.best, c.bestCost, c.bestWait, c.bestBase = i, sc.cost, sc.wait, sc.base
		}
	}
	return rNone
}

// decide turns a choice into the decision: the cheapest pool within its wait target, else the
// least-wait one past it, else no pool and why. With exp set it marks the winner and the rule.
func (c *choice) decide(s *Snapshot, exp *Explanation) (Decision, int) {
	rule := RuleCheapest
	if c.targeted {
		rule = RuleCheapestWithinWait
	}
	best, cost, wait, base, over := c.best, c.bestCost, c.bestWait, c.bestBase, false
	if best < 0 && c.fb.best >= 0 {
		best, cost, wait, base, over, rule = c.fb.best, c.fb.cost, c.fb.wait, c.fb.base, true, RuleLeastWait
	}
	if best < 0 {
		return Decision{Index: -1, outcome: classify(len(s.pools), c.matching, c.saturated), noHandler: c.served == 0 && c.denied > 0}, -1
	}
	e := &s.pools[best]
	if exp != nil {
		exp.Candidates[e.input].Won = true
		exp.Rule = rule
	}
	return Decision{Region: e.pool.Region, Pool: e.pool.Name, Index: e.input, Cost: cost, Expected: base, OK: true,
		Wait: seconds(wait), OverTarget: over, outcome: placed}, best
}

// fallback is the least-wait pool among those past their wait target.
type fallback struct {
	best       int
	wait, cost float64
	base       float64
}

func (f *fallback) offer(i int, sc *parts) {
	if lessWait(i, sc.wait, sc.cost, f.best, f.wait, f.cost) {
		f.best, f.wait, f.cost, f.base = i, sc.wait, sc.cost, sc.base
	}
}

// walk is Place's search: the candidates of one decision, cheapest bound first.
type walk struct {
	q *query
	filter
	floor float64 // the type's shortest duration, hours
	choice
}

// run visits the available, matching, not known saturated pools inside part (outside it when
// invert; every pool when part is nil), in snapshot order, and stops at the first pool whose
// bound (published cost × floor + cross, the least it can score) exceeds the best so far.
func (w *walk) run(part bitset, invert bool, cross float64) {
	q := w.q
	s := q.st.snap
	for wd := range s.words {
		m := q.v.avail[wd]
		if !q.t.Critical {
			m &^= q.v.saturated[wd].Load()
		}
		if lowHeld(q.t) {
			m &^= q.v.paused[wd]
		}
		for _, bs := range w.tags {
			m &= bs[wd]
		}
		if w.serving != nil {
			m &= w.serving[wd]
		}
		if w.closed != nil {
			m &^= w.closed[wd]
		}
		if part != nil {
			if invert {
				m &^= part[wd]
			} else {
				m &= part[wd]
			}
		}
		for ; m != 0; m &= m - 1 {
			i := wd<<6 | bits.TrailingZeros64(m)
			e := &s.pools[i]
			if w.regions != nil && !w.regions.has(int(e.region)) {
				continue
			}
			if q.st.ordered {
				if beyond(i, e.cost*w.floor+cross, w.best, w.bestCost) {
					return // nor can any later pool
				}
				// The same bound with this pool's own duration: cheaper than scoring it.
				if q.durs != nil && beyond(i, e.cost*q.durs.hours[i]+cross, w.best, w.bestCost) {
					continue
				}
			}
			sc := q.score(i)
			if sc.saturated && !q.t.Critical {
				continue
			}
			if sc.over {
				// Only needed when no pool within its target is found, and then nothing was
				// cut short (the bounds need a best), so every candidate was offered.
				w.fb.offer(i, &sc)
				continue
			}
			if better(i, sc.cost, w.best, w.bestCost) {
				w.best, w.bestCost, w.bestWait, w.bestBase = i, sc.cost, sc.wait, sc.base
			}
		}
	}
}

func hasAll(tags []bitset, i int) bool {
	for _, bs := range tags {
		if !bs.has(i) {
			return false
		}
	}
	return true
}

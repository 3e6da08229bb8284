package placement

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Snapshot is an immutable, indexed copy of every pool's figures. Build one per published view
// with NewSnapshot and share it between goroutines, decisions and Placers of the same Config.
//
// Pools are kept sorted by their published hourly cost: effective price × the watermark penalty
// of their published queue fill. Damping only adds fill and a duration is at least the type's
// shortest, so a pool's published cost × the shortest duration bounds its score from below, and a
// decision walking pools in this order stops at the first pool whose bound exceeds the best score.
// Each tag key=value pair has a bitset of the pools carrying it, so a task's tags cost one AND per
// 64 pools instead of a map lookup per pool.
type Snapshot struct {
	pools    []entry            // by (published cost, region, name)
	src      []Pool             // the pools as given
	byKey    map[string]int     // pool key → index in pools
	regions  map[string]int32   // region → region number
	inRegion []bitset           // region number → its pools
	tags     map[tagPair]bitset // tag pair → pools carrying it
	// handles: task type → pools that serve it (those with Types nil included); nil when no
	// pool lists its types, and then no type is filtered. open: the pools with Types nil.
	handles map[string]bitset
	open    bitset
	// owned: the pools that are some tenants' own (Pool.Tenants); closedFor: tenant with pools
	// of its own → the owned pools that are not its. Both nil when no pool is anyone's own.
	owned     bitset
	closedFor map[string]bitset
	words     int   // length of every bitset
	curve     curve // the penalty the order was computed with
	servers   int   // servers placing into these pools (0: the Placer's Config.Servers)
}

// WithServers records how many servers place into these pools (counted from
// their registrations), so each assumes 1/n of a pool's headroom; n < 1
// leaves the Placer's Config.Servers in force. Call it before the snapshot is
// shared; it returns s.
func (s *Snapshot) WithServers(n int) *Snapshot {
	s.servers = max(n, 0)
	return s
}

// Servers is the count WithServers recorded (0: none).
func (s *Snapshot) Servers() int { return s.servers }

// curve is the part of a Config the snapshot order depends on.
type curve struct{ hard, max float64 }

// entry is one pool as decisions read it: the fields of the hot path first and small, the rest
// behind a pointer.
type entry struct {
	cost     float64 // price × penalty of the published fill: the sort key
	price    float64 // effective USD per slot-hour
	ready    int64
	queue    int
	region   int32   // region number
	nameRank int32   // rank by (region, name): orders pools of equal published cost
	input    int     // index in the slice given to NewSnapshot
	drain    float64 // Pool.DrainRate, tasks per second
	maxWait  float64 // Pool.MaxWait in seconds; 0: none
	key      string
	pool     *Pool // into src
}

type tagPair struct{ key, value string }

// NewSnapshot validates pools and indexes them for Placers using cfg (a Placer with other
// watermarks still decides correctly, but walks every matching pool). It copies what it keeps
// (tags included), so the caller may reuse pools afterwards; capacity schedules are shared and
// must not be changed.
//
// Build a Snapshot once per published view and reuse it for many decisions: it
// sorts pools by their published cost and indexes them by tag and region, so [Placer.Place] touches
// only matching pools, stops at the first that cannot win, and does not allocate in the common
// case. Time is always passed in (now), never read from the clock.
func NewSnapshot(cfg Config, pools []Pool) (*Snapshot, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Snapshot{
		curve:   curveOf(&cfg),
		pools:   make([]entry, len(pools)),
		src:     make([]Pool, len(pools)),
		byKey:   make(map[string]int, len(pools)),
		regions: make(map[string]int32),
		tags:    make(map[tagPair]bitset),
		words:   (len(pools) + 63) / 64,
	}
	for i, p := range pools {
		key := p.Key()
		if err := validatePool(&p); err != nil {
			return nil, fmt.Errorf("placement: pool %q: %w", key, err)
		}
		if _, dup := s.byKey[key]; dup {
			return nil, fmt.Errorf("placement: pool %q: listed twice", key)
		}
		s.byKey[key] = i
		p.Tags = maps.Clone(p.Tags)
		p.Types = slices.Clone(p.Types) // nil stays nil: any type
		p.Tenants = slices.Clone(p.Tenants)
		price := p.PricePerSlotHour * (1 - p.Discount)
		cost := price * cfg.penalty(fill(int64(p.Ready), p.QueueCapacity))
		s.src[i] = p
		s.pools[i] = entry{
			cost: cost, price: price, ready: int64(p.Ready), queue: p.QueueCapacity,
			drain: p.DrainRate, maxWait: p.MaxWait.Seconds(),
			input: i, key: key, pool: &s.src[i],
		}
	}
	byName := make([]int, len(pools))
	for i := range byName {
		byName[i] = i
	}
	slices.SortFunc(byName, func(a, b int) int { return compareNames(&s.pools[a], &s.pools[b]) })
	for rank, i := range byName {
		s.pools[i].nameRank = int32(rank)
	}
	slices.SortFunc(s.pools, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.cost, b.cost), int(a.nameRank-b.nameRank))
	})
	for i := range s.pools {
		e := &s.pools[i]
		s.byKey[e.key] = i
		r, ok := s.regions[e.pool.Region]
		if !ok {
			r = int32(len(s.regions))
			s.regions[e.pool.Region] = r
			s.inRegion = append(s.inRegion, make(bitset, s.words))
		}
		e.region = r
		s.inRegion[r].set(i)
		for k, v := range e.pool.Tags {
			tp := tagPair{k, v}
			bs, ok := s.tags[tp]
			if !ok {
				bs = make(bitset, s.words)
				s.tags[tp] = bs
			}
			bs.set(i)
		}
	}
	s.indexTypes()
	s.indexTenants()
	return s, nil
}

// indexTenants builds owned and ownedBy from the pools' Tenants.
func (s *Snapshot) indexTenants() {
	for i := range s.pools {
		tenants := s.pools[i].pool.Tenants
		if len(tenants) == 0 {
			continue
		}
		if s.owned == nil {
			s.owned, s.closedFor = make(bitset, s.words), map[string]bitset{}
		}
		s.owned.set(i)
		for _, t := range tenants {
			if _, ok := s.closedFor[t]; !ok {
				s.closedFor[t] = make(bitset, s.words)
			}
		}
	}
	for t, bs := range s.closedFor {
		for i := range s.pools {
			if p := s.pools[i].pool; !p.Admits(t) {
				bs.set(i)
			}
		}
	}
}

// closedTo is the set of pools that are other tenants' own, never tenant's; nil when there are
// none.
func (s *Snapshot) closedTo(tenant string) bitset {
	if s.owned == nil {
		return nil
	}
	if bs, ok := s.closedFor[tenant]; ok {
		return bs
	}
	return s.owned
}

// indexTypes builds handles and open from the pools' Types.
func (s *Snapshot) indexTypes() {
	s.open = make(bitset, s.words)
	for i := range s.pools {
		types := s.pools[i].pool.Types
		if types == nil {
			s.open.set(i)
			continue
		}
		if s.handles == nil {
			s.handles = map[string]bitset{}
		}
		for _, t := range types {
			bs, ok := s.handles[t]
			if !ok {
				bs = make(bitset, s.words)
				s.handles[t] = bs
			}
			bs.set(i)
		}
	}
	for _, bs := range s.handles {
		for w := range bs {
			bs[w] |= s.open[w]
		}
	}
}

// serving is the set of pools that serve typ; nil when no pool restricts its types.
func (s *Snapshot) serving(typ string) bitset {
	if s.handles == nil {
		return nil
	}
	if bs, ok := s.handles[typ]; ok {
		return bs
	}
	return s.open
}

// Len returns the number of pools.
func (s *Snapshot) Len() int {
	if s == nil {
		return 0
	}
	return len(s.pools)
}

func curveOf(c *Config) curve { return curve{c.HardWatermark, c.PenaltyMax} }

func compareNames(a, b *entry) int {
	return cmp.Or(cmp.Compare(a.pool.Region, b.pool.Region), cmp.Compare(a.pool.Name, b.pool.Name))
}

func validatePool(p *Pool) error {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case p.Region == "" || p.Name == "":
		return fmt.Errorf("region and name are required")
	case p.Slots < 0 || p.Running < 0 || p.Ready < 0 || p.QueueCapacity < 0:
		return fmt.Errorf("slots, running, ready and queue capacity must be >= 0")
	case !finite(p.RunningSlots) || p.RunningSlots < 0:
		return fmt.Errorf("running slots %v must be >= 0", p.RunningSlots)
	case !finite(p.PricePerSlotHour) || p.PricePerSlotHour < 0:
		return fmt.Errorf("price per slot-hour %v must be >= 0", p.PricePerSlotHour)
	case !finite(p.Discount) || p.Discount < 0 || p.Discount > 1:
		return fmt.Errorf("discount %v must be in [0, 1]", p.Discount)
	case !finite(p.DrainRate) || p.DrainRate < 0:
		return fmt.Errorf("drain rate %v must be >= 0", p.DrainRate)
	case p.MaxWait < 0:
		return fmt.Errorf("max wait %v must be >= 0", p.MaxWait)
	}
	if err := p.Window.validate(); err != nil {
		return fmt.Errorf("capacity schedule: %w", err)
	}
	return nil
}

// bitset is a set of pool indexes, 64 per word.
type bitset []uint64

func (b bitset) set(i int)      { b[i>>6] |= 1 << (i & 63) }
func (b bitset) has(i int) bool { return b[i>>6]&(1<<(i&63)) != 0 }

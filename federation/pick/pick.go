package pick

// Admission is authoritative in the store. Placement damps: each server
// counts its own recent placements into a pool's figures and assumes only
// its share of the headroom until the next figures arrive, so that N
// servers do not all pour into the pool that looked emptiest. That spreads
// choices; it never refuses work. Whether a local pool takes a task is
// decided in this region's Redis, atomically, by the submit script
// (queue.NewTask.AdmitMax): the pool's READY tasks against ⌊queue capacity
// × the hard watermark⌋, the line at which placement calls a pool
// SATURATED. A task the store refuses spills to the next candidate by
// score; 429 only when no candidate is left.

import (
	"context"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
)

// Config of a server's picker.
type Config struct {
	Region    string   // this server's region
	Regions   []string // every region of the federation (config regions:)
	Placement placement.Config
	// NoCapacityRetry is how long a due task that no pool can take now
	// waits before it is placed again.
	NoCapacityRetry time.Duration
	View            *view.View
	Flights         *view.Flights
	Metrics         *metrics.Metrics
	Now             func() time.Time
}

// Picker places tasks on the global view: placement's decision for a
// spec or a stored task, narrowed by the regions refusing its tenant's
// hand-offs, and the admission limit of this region's pools.
type Picker struct {
	cfg      Config
	placer   *placement.Placer
	refusals refusals
}

// New is the picker of cfg, deciding with placer.
func New(cfg Config, placer *placement.Placer) *Picker { return &Picker{cfg: cfg, placer: placer} }

var _ region.Placer = (*Picker)(nil)

// AdmitMax is the READY limit of this region's pool for a task: ⌊queue
// capacity × hard watermark⌋ from the pool's published figures; 0 (no
// limit) for a critical task or a pool the view does not know.
func (p *Picker) AdmitMax(pool string, critical bool) int {
	if critical {
		return 0
	}
	ri, ok := p.cfg.View.Region(p.cfg.Region)
	if !ok {
		return 0
	}
	hard := p.cfg.Placement.HardWatermark
	if hard <= 0 {
		hard = placement.DefaultConfig().HardWatermark
	}
	for _, p := range ri.Pools {
		if p.Name == pool && p.QueueCapacity > 0 {
			return max(1, int(math.Floor(float64(p.QueueCapacity)*hard+1e-9)))
		}
	}
	return 0
}

// candidates are the pools that passed every filter but damping's
// saturation, cheapest first (placement's score, then its order).
func (p *Picker) candidates(snap *placement.Snapshot, sp *task.Spec, now time.Time) []placement.Candidate {
	ex := p.Explain(snap, sp, now)
	var out []placement.Candidate
	for _, c := range ex.Candidates {
		if c.Reason == "" || c.Reason == placement.ReasonSaturated {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Cost < out[j].Cost })
	return out
}

// SpillLocal sets nt to the cheapest pool of this region that passed the
// filters and is not in refused, with its admission limit; false when
// there is none.
func (p *Picker) SpillLocal(snap *placement.Snapshot, sp *task.Spec, now time.Time, refused map[string]bool, nt *queue.NewTask) bool {
	for _, c := range p.candidates(snap, sp, now) {
		if c.Region != p.cfg.Region || refused[c.Pool] {
			continue
		}
		// A pool paused for low priorities stays closed to them.
		if c.Reason == placement.ReasonSaturated && !sp.Critical && sp.Priority != nil && *sp.Priority >= 3 && p.paused(c.Pool) {
			continue
		}
		nt.Pool, nt.HandOff, nt.AdmitMax = c.Pool, "", p.AdmitMax(c.Pool, sp.Critical)
		return true
	}
	return false
}

// SpillRemote sets nt to a hand-off to the cheapest eligible pool of
// another region (its own store decides there); false when there is none.
func (p *Picker) SpillRemote(snap *placement.Snapshot, sp *task.Spec, now time.Time, nt *queue.NewTask) bool {
	for _, c := range p.candidates(snap, sp, now) {
		if c.Region != p.cfg.Region && c.Reason == "" {
			nt.Pool, nt.HandOff, nt.AdmitMax = c.Pool, c.Region, 0
			return true
		}
	}
	return false
}

// Unregistered is the first of regions, a region of the federation,
// that this server's view does not hold (its registration lapsed, or this
// server has not read it yet): no placement can say whether it would take
// the task. false when every one is in the view, or regions is empty.
func (p *Picker) Unregistered(regions []string) (string, bool) {
	for _, name := range regions {
		if !slices.Contains(p.cfg.Regions, name) && name != p.cfg.Region {
			continue
		}
		if _, ok := p.cfg.View.Region(name); !ok {
			return name, true
		}
	}
	return "", false
}

// Place decides where sp goes; a task with a price cap is placed through
// the explanation (placement.Explanation.CapPrice: never above the cap),
// which damping does not count.
func (p *Picker) Place(snap *placement.Snapshot, sp *task.Spec, now time.Time) placement.Decision {
	if sp.MaxPricePerSlotHour <= 0 {
		return p.placer.Place(snap, p.Task(sp, now), now)
	}
	return p.Explain(snap, sp, now).Decision
}

// Explain is placement's explanation of sp with its price cap applied.
func (p *Picker) Explain(snap *placement.Snapshot, sp *task.Spec, now time.Time) placement.Explanation {
	ex := p.placer.Explain(snap, p.Task(sp, now), now)
	ex.CapPrice(sp.MaxPricePerSlotHour)
	return ex
}

// paused reports whether backpressure holds this region's pool's low
// priorities.
func (p *Picker) paused(pool string) bool {
	ri, ok := p.cfg.View.Region(p.cfg.Region)
	if !ok {
		return false
	}
	for _, p := range ri.Pools {
		if p.Name == pool {
			return p.Paused
		}
	}
	return false
}

// Task is sp as placement sees it now: its regions without those refusing
// its tenant's hand-offs for their max_backlog (refusals.go).
func (p *Picker) Task(sp *task.Spec, now time.Time) placement.Task {
	prio := 0
	if sp.Priority != nil {
		prio = *sp.Priority
	}
	pt := placement.Task{Type: sp.Type, Tags: sp.Tags, Regions: sp.Regions, Critical: sp.Critical, Priority: prio, Home: p.cfg.Region,
		MaxWait: time.Duration(sp.MaxWait), Tenant: sp.Tenant}
	pt.Regions, _ = p.Regions(sp.Regions, sp.Tenant, now)
	return pt
}

// Stored is a stored task as placement sees it, placed from this region
// into regions.
func (p *Picker) Stored(t *task.Task, regions []string) placement.Task {
	return placement.Task{Type: t.Type, Tags: t.Tags, Regions: regions, Critical: t.Critical, Priority: t.Priority, Home: p.cfg.Region,
		MaxWait: time.Duration(t.MaxWait), Tenant: t.Tenant}
}

// Decide is placement's decision for a stored task pt, counted for
// damping; under a price cap (priceCap > 0) the capped explanation's
// decision replaces it (never above the cap).
func (p *Picker) Decide(snap *placement.Snapshot, pt placement.Task, priceCap float64, now time.Time) placement.Decision {
	d := p.placer.Place(snap, pt, now)
	if priceCap > 0 {
		d = p.ExplainTask(snap, pt, priceCap, now).Decision
	}
	return d
}

// ExplainTask is placement's explanation of pt with priceCap applied (none
// when priceCap ≤ 0).
func (p *Picker) ExplainTask(snap *placement.Snapshot, pt placement.Task, priceCap float64, now time.Time) placement.Explanation {
	ex := p.placer.Explain(snap, pt, now)
	ex.CapPrice(priceCap)
	return ex
}

// PlaceDue implements region.Placer: due tasks of this region are placed
// with the prices and watermarks of now, across regions.
func (p *Picker) PlaceDue(_ context.Context, tasks []*task.Task) []queue.Assignment {
	now := p.cfg.Now()
	vs := p.cfg.View.Current()
	out := make([]queue.Assignment, 0, len(tasks))
	for _, t := range tasks {
		regions, ok := p.Regions(t.Regions, t.Tenant, now)
		if !ok {
			// Every region it may go to refused its tenant's hand-offs for
			// their max_backlog: it waits here and is placed again.
			out = append(out, queue.Assignment{ID: t.ID, RetryAt: now.Add(p.cfg.NoCapacityRetry)})
			continue
		}
		d := p.Decide(vs.Pools, p.Stored(t, regions), t.MaxPricePerSlotHour, now)
		p.cfg.Metrics.Decision(p.cfg.Region, d)
		switch {
		case d.OK && d.Region == p.cfg.Region:
			out = append(out, queue.Assignment{ID: t.ID, Pool: d.Pool})
		case d.OK:
			out = append(out, queue.Assignment{ID: t.ID, Pool: d.Pool, Region: d.Region})
			p.cfg.Flights.Add(t.ID, d.Region, d.Pool, vs.Updated[d.Region], now)
		case d.NoHandler():
			out = append(out, queue.Assignment{ID: t.ID, RetryAt: now.Add(p.cfg.NoCapacityRetry), Reason: task.ReasonNoHandler})
		default:
			out = append(out, queue.Assignment{ID: t.ID, RetryAt: now.Add(p.cfg.NoCapacityRetry)})
		}
	}
	return out
}

package federation

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
	"math"
	"sort"
	"time"

	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// maxSpillRounds bounds the submit calls one request makes while its
// tasks spill from pool to pool.
const maxSpillRounds = 8

// admitMax is the READY limit of this region's pool for a task: ⌊queue
// capacity × hard watermark⌋ from the pool's published figures; 0 (no
// limit) for a critical task or a pool the view does not know.
func (n *Node) admitMax(pool string, critical bool) int {
	if critical {
		return 0
	}
	ri, ok := n.view.Region(n.cfg.Region)
	if !ok {
		return 0
	}
	hard := n.cfg.Placement.HardWatermark
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
func (n *Node) candidates(snap *placement.Snapshot, sp *task.Spec, now time.Time) []placement.Candidate {
	ex := n.explain(snap, sp, now)
	var out []placement.Candidate
	for _, c := range ex.Candidates {
		if c.Reason == "" || c.Reason == placement.ReasonSaturated {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Cost < out[j].Cost })
	return out
}

// spillLocal sets nt to the cheapest pool of this region that passed the
// filters and is not in refused, with its admission limit; false when
// there is none.
func (n *Node) spillLocal(snap *placement.Snapshot, sp *task.Spec, now time.Time, refused map[string]bool, nt *queue.NewTask) bool {
	for _, c := range n.candidates(snap, sp, now) {
		if c.Region != n.cfg.Region || refused[c.Pool] {
			continue
		}
		// A pool paused for low priorities stays closed to them.
		if c.Reason == placement.ReasonSaturated && !sp.Critical && sp.Priority != nil && *sp.Priority >= 3 && n.paused(c.Pool) {
			continue
		}
		nt.Pool, nt.HandOff, nt.AdmitMax = c.Pool, "", n.admitMax(c.Pool, sp.Critical)
		return true
	}
	return false
}

// spillRemote sets nt to a hand-off to the cheapest eligible pool of
// another region (its own store decides there); false when there is none.
func (n *Node) spillRemote(snap *placement.Snapshot, sp *task.Spec, now time.Time, nt *queue.NewTask) bool {
	for _, c := range n.candidates(snap, sp, now) {
		if c.Region != n.cfg.Region && c.Reason == "" {
			nt.Pool, nt.HandOff, nt.AdmitMax = c.Pool, c.Region, 0
			return true
		}
	}
	return false
}

// place decides where sp goes; a task with a price cap is placed through
// the explanation (placement.Explanation.CapPrice: never above the cap),
// which damping does not count.
func (n *Node) place(snap *placement.Snapshot, sp *task.Spec, now time.Time) placement.Decision {
	if sp.MaxPricePerSlotHour <= 0 {
		return n.placer.Place(snap, n.placeTask(sp, now), now)
	}
	return n.explain(snap, sp, now).Decision
}

// explain is placement's explanation of sp with its price cap applied.
func (n *Node) explain(snap *placement.Snapshot, sp *task.Spec, now time.Time) placement.Explanation {
	ex := n.placer.Explain(snap, n.placeTask(sp, now), now)
	ex.CapPrice(sp.MaxPricePerSlotHour)
	return ex
}

// paused reports whether backpressure holds this region's pool's low
// priorities.
func (n *Node) paused(pool string) bool {
	ri, ok := n.view.Region(n.cfg.Region)
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

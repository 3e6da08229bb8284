package region

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/queue"
)

// SlowLane is a pool's slow lane as configured (docs/fairness.md): tasks
// of a type whose learnt run time (or a running task's time so far) is at
// least Threshold hold at most MaxShare of the pool's slots.
type SlowLane struct {
	Threshold time.Duration
	MaxShare  float64 // 0 < MaxShare < 1
}

// laneSlots is how many slow tasks a pool of slots runs at once: the
// share's floor, at least 1 so that slow work is never stopped outright.
func laneSlots(share float64, slots int) int {
	return max(int(math.Floor(share*float64(slots)+1e-9)), 1)
}

// slowLanes is what the leader writes for the lanes now: each pool's
// slots as published (its live workers', capped by its configured ones),
// and the types its learnt run times put past the threshold.
func slowLanes(cfg map[string]SlowLane, figs Figures, rts []queue.RunTime) map[string]queue.SlowLane {
	if len(cfg) == 0 {
		return nil
	}
	out := map[string]queue.SlowLane{}
	for _, p := range figs.Pools {
		l, ok := cfg[p.Name]
		if !ok {
			continue
		}
		q := queue.SlowLane{Threshold: l.Threshold, Slots: laneSlots(l.MaxShare, p.Slots)}
		// A type is slow for a tenant by that tenant's runs of it only
		// (rts holds one entry per pool, type and tenant): another
		// tenant's slow handler of the type holds no task of this one.
		for _, rt := range rts {
			if rt.Pool != p.Name || rt.Count == 0 {
				continue
			}
			t := queue.LaneType{Type: rt.Type, Tenant: rt.Tenant}
			q.Known = append(q.Known, t)
			if rt.Mean >= l.Threshold {
				q.Slow = append(q.Slow, t)
			}
		}
		byField := func(a, b queue.LaneType) int {
			return cmp.Or(strings.Compare(a.Type, b.Type), strings.Compare(a.Tenant, b.Tenant))
		}
		slices.SortFunc(q.Known, byField)
		slices.SortFunc(q.Slow, byField)
		out[p.Name] = q
	}
	return out
}

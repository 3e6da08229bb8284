package httpapi

import (
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/region"
	"github.com/prometheus/client_golang/prometheus"
)

// windowStatus says whether a pool's capacity schedule has it open now
// (inside a window with slots; outside every window a scheduled pool has
// none), with how many slots, and when the next window starts or ends.
// nil: the pool has no schedule (always its live slots).
func windowStatus(s *region.Schedule, now time.Time) *apiv1.CapacityWindow {
	if s == nil || len(s.Windows) == 0 {
		return nil
	}
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		loc = time.UTC
	}
	local := now.In(loc)
	minute := local.Hour()*60 + local.Minute()
	out := &apiv1.CapacityWindow{Timezone: loc.String()}
	next := -1 // minutes from now to the nearest boundary
	for _, w := range s.Windows {
		a, err1 := placement.ParseTimeOfDay(w.Start)
		// 24:00 is the end of the day; an end equal to the start (00:00
		// to 24:00) makes a window of the whole day, which never changes.
		b, err2 := placement.ParseWindowEnd(w.End)
		if err1 != nil || err2 != nil {
			continue
		}
		if (a < b && a <= minute && minute < b) || (b <= a && (minute >= a || minute < b)) {
			out.Open, out.Slots, out.Window = w.Slots > 0, w.Slots, w.Start+"–"+w.End
		}
		if a == b {
			continue
		}
		for _, edge := range []int{a, b} {
			d := (edge - minute + 24*60) % (24 * 60)
			if d == 0 {
				d = 24 * 60
			}
			if next < 0 || d < next {
				next = d
			}
		}
	}
	if next > 0 {
		at := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), 0, 0, loc).Add(time.Duration(next) * time.Minute)
		out.NextChange = &at
	}
	return out
}

// windowSlots makes a windowed pool's Slots the slots its window lends
// now, as claims hold it (region.withWindows) and placement counts it:
// inside a window its slots, at most the live workers' (a pool that
// scales from zero: the window's), outside every window none; the live
// workers' slots move to WorkerSlots and Utilisation is over the window's.
func windowSlots(ps *apiv1.PoolStatus, scaleFromZero bool) {
	cw := ps.CapacityWindow
	if cw == nil {
		return
	}
	ps.WorkerSlots = ps.Slots
	n := 0
	if cw.Open {
		n = cw.Slots
		if !scaleFromZero {
			n = min(n, ps.Slots)
		}
	}
	ps.Slots, ps.Utilisation = n, 0
	if n > 0 {
		ps.Utilisation = ps.RunningSlots / float64(n)
	}
}

// refusalMeter turns this server's ax_tasks_rejected_total of its region
// (by reason) and ax_pool_refusals_total (by pool) into refusals per
// minute: a sample per call (at most one a second; the first when the API
// is made), the rate over the last minute of them — over a whole minute
// while the meter has watched for less, so a burst it saw is the count it
// saw, not extrapolated.
type refusalMeter struct {
	gather prometheus.Gatherer
	region string
	mu     sync.Mutex
	at     []time.Time
	counts []map[refusalKey]float64
}

// refusalKey is one counted series: a reason (pool empty), or a pool
// (target and pool; reason empty).
type refusalKey struct{ reason, target, pool string }

// refusals is what the meter saw in the last minute, per minute.
type refusals struct {
	byReason map[string]float64
	byPool   map[[2]string]float64 // region, pool
}

// pool is the pool's refusals per minute (0 while the meter cannot say).
func (r refusals) pool(region, pool string) float64 { return r.byPool[[2]string{region, pool}] }

func (m *refusalMeter) perMinute(now time.Time) refusals {
	cur := map[refusalKey]float64{}
	if m.gather == nil {
		return refusals{}
	}
	mfs, err := m.gather.Gather()
	if err != nil {
		return refusals{}
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if name != "ax_tasks_rejected_total" && name != "ax_pool_refusals_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var k refusalKey
			ours := false
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "region":
					ours = l.GetValue() == m.region
				case "reason":
					k.reason = l.GetValue()
				case "target":
					k.target = l.GetValue()
				case "pool":
					k.pool = l.GetValue()
				}
			}
			if ours {
				cur[k] += mt.GetCounter().GetValue()
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.at); n == 0 || now.Sub(m.at[n-1]) >= time.Second {
		m.at, m.counts = append(m.at, now), append(m.counts, cur)
	}
	// The oldest sample within the last minute (one older kept as the base).
	for len(m.at) > 2 && now.Sub(m.at[1]) >= time.Minute {
		m.at, m.counts = m.at[1:], m.counts[1:]
	}
	span := max(now.Sub(m.at[0]), time.Minute)
	out := refusals{byReason: map[string]float64{}, byPool: map[[2]string]float64{}}
	for k, v := range cur {
		r := (v - m.counts[0][k]) * float64(time.Minute) / float64(span)
		if k.pool != "" {
			out.byPool[[2]string{k.target, k.pool}] += r
		} else {
			out.byReason[k.reason] += r
		}
	}
	return out
}

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
		b, err2 := placement.ParseTimeOfDay(w.End)
		if err1 != nil || err2 != nil {
			continue
		}
		if (a < b && a <= minute && minute < b) || (b <= a && (minute >= a || minute < b)) {
			out.Open, out.Slots, out.Window = w.Slots > 0, w.Slots, w.Start+"–"+w.End
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

// refusalMeter turns this server's ax_tasks_rejected_total of its region
// into refusals per minute: a sample per call (at most one a second), the
// rate over the last minute of them.
type refusalMeter struct {
	gather prometheus.Gatherer
	region string
	mu     sync.Mutex
	at     []time.Time
	counts []map[string]float64
}

func (m *refusalMeter) perMinute(now time.Time) map[string]float64 {
	cur := map[string]float64{}
	mfs, err := m.gather.Gather()
	if err != nil {
		return nil
	}
	for _, mf := range mfs {
		if mf.GetName() != "ax_tasks_rejected_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			reason, ours := "", false
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "region":
					ours = l.GetValue() == m.region
				case "reason":
					reason = l.GetValue()
				}
			}
			if ours {
				cur[reason] += mt.GetCounter().GetValue()
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
	span := now.Sub(m.at[0])
	if span < 5*time.Second {
		return nil // too short to say
	}
	out := map[string]float64{}
	for reason, v := range cur {
		out[reason] = (v - m.counts[0][reason]) * float64(time.Minute) / float64(span)
	}
	return out
}

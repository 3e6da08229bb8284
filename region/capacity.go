package region

import (
	"time"

	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
)

// SlotsAt is the slots the schedule lends at now: the slots of the window
// now falls in (read in the schedule's time zone, UTC when it names none
// it knows), 0 outside every window. A window that does not parse lends
// nothing.
func (s *Schedule) SlotsAt(now time.Time) int {
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		loc = time.UTC
	}
	cs := &placement.CapacitySchedule{Location: loc}
	for _, w := range s.Windows {
		a, err1 := placement.ParseTimeOfDay(w.Start)
		b, err2 := placement.ParseWindowEnd(w.End)
		if err1 == nil && err2 == nil {
			cs.Windows = append(cs.Windows, placement.Window{Start: a, End: b, Slots: w.Slots})
		}
	}
	slots, _ := cs.SlotsAt(now, 0)
	return slots
}

// withWindows is the region's limits (limits nil: none configured) and,
// for each pool with a capacity schedule, a concurrency limit of the slots
// its window lends at now() (queue.LimitPool; Closed outside every
// window). Claims enforce it (claim.lua), so a window that lends 3 slots
// runs 3 tasks at once whatever its workers' slots, and placement's view
// of the window is not the only guard. Nil when there is neither.
func withWindows(limits func() []queue.Limit, pools []Pool, now func() time.Time) func() []queue.Limit {
	var scheduled []Pool
	for _, p := range pools {
		if p.Schedule != nil && len(p.Schedule.Windows) > 0 {
			scheduled = append(scheduled, p)
		}
	}
	if len(scheduled) == 0 {
		return limits
	}
	return func() []queue.Limit {
		var out []queue.Limit
		if limits != nil {
			out = append(out, limits()...)
		}
		at := now()
		for _, p := range scheduled {
			n := p.Schedule.SlotsAt(at)
			out = append(out, queue.Limit{Kind: queue.LimitPool, Name: p.Name, Concurrency: n, Closed: n <= 0})
		}
		return out
	}
}

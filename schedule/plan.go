package schedule

import (
	"github.com/ax-sched/ax/schedule/slots"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// firePlan is what one pass does with a schedule's due slots.
type firePlan struct {
	// skipTo, when set, is the latest missed slot, recorded as handled
	// without a task (misfire skip) before any firing.
	skipTo time.Time
	// fire are the slots to fire, oldest first: the missed ones the policy
	// keeps, then those on time.
	fire []time.Time
	// skipped counts the missed slots given up (up to countCap).
	skipped int
}

// maxOnTime bounds the on-time slots of one pass: with slots a second apart
// and a two-second tolerance there are three.
const maxOnTime = 100

// planSlots decides, at now, what to do with the slots after the last one
// handled (after). A slot older than tolerance at now is missed, and the
// misfire policy decides; later ones are on time and fire.
func planSlots(c slots.Clock, d *apiv1.Schedule, after, now time.Time, tolerance time.Duration) firePlan {
	var p firePlan
	cutoff := now.Add(-tolerance)
	switch d.Misfire {
	case MisfireSkip:
		if s, ok := c.NewestBefore(after, cutoff); ok {
			p.skipTo = s
			p.skipped = c.Count(after, s) + 1
		}
	default:
		k := 1
		if d.Misfire == MisfireCatchUp {
			k = max(d.CatchUpLimit, 1)
		}
		if missed := c.Latest(after, cutoff, k); len(missed) > 0 {
			p.fire = missed
			p.skipped = c.Count(after, missed[0])
		}
	}
	from := after
	if cutoff.Add(-time.Nanosecond).After(from) {
		from = cutoff.Add(-time.Nanosecond)
	}
	p.fire = append(p.fire, c.Between(from, now, maxOnTime)...)
	return p
}

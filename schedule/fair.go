package schedule

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Limits are what one tenant's schedules may take of the federation
// leader: how many it may have (Create refuses more) and how many slots a
// second it fires (a token bucket holding one second's worth; slots beyond
// wait for the next pass, and those it delays past Config.Tolerance go
// through their misfire policy).
type Limits struct {
	MaxSchedules   int     // 0: MaxSchedulesDefault
	FiresPerSecond float64 // 0: FiresPerSecondDefault
	// MaxBackfillPeriods bounds the periods of one backfill (a longer
	// range is refused, 400 naming to); 0: MaxBackfillPeriodsDefault.
	MaxBackfillPeriods int
}

// Defaults of Limits.
const (
	MaxSchedulesDefault       = 1000
	FiresPerSecondDefault     = 50
	MaxBackfillPeriodsDefault = 1000
)

func (l Limits) orDefaults() Limits {
	if l.MaxSchedules <= 0 {
		l.MaxSchedules = MaxSchedulesDefault
	}
	if l.MaxBackfillPeriods <= 0 {
		l.MaxBackfillPeriods = MaxBackfillPeriodsDefault
	}
	if !(l.FiresPerSecond > 0) {
		l.FiresPerSecond = FiresPerSecondDefault
	}
	return l
}

// limits returns tenant's limits, defaults filled in.
func (s *Scheduler) limits(tenant string) Limits {
	if s.cfg.Limits == nil {
		return Limits{}.orDefaults()
	}
	return s.cfg.Limits(tenant).orDefaults()
}

// maxPass bounds the firing of one pass: past it the pass ends and the
// next one starts with the schedules then due, every tenant's first, so a
// slow home region or a long queue of one tenant's slots delays another
// tenant's slot by at most about this.
const maxPass = 200 * time.Millisecond

// bucket is one tenant's fires: tokens refill at rate a second up to
// burst (one second's worth, at least one). It runs on the wall clock,
// not Config.Now: it bounds the leader's real work.
type bucket struct {
	tokens float64
	at     time.Time
}

// refill brings b to now and returns its tokens.
func (b *bucket) refill(now time.Time, l Limits) float64 {
	burst := max(l.FiresPerSecond, 1)
	if b.at.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*l.FiresPerSecond)
	}
	b.at = now
	return b.tokens
}

// untilOne is how long b takes to hold one token again.
func (b *bucket) untilOne(l Limits) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / l.FiresPerSecond * float64(time.Second))
}

// dueQueues are the schedules due now, one queue per tenant, each oldest
// slot first, and the tenants in the order this pass serves them: sorted,
// then rotated by turn, so no tenant is always first.
type dueQueues struct {
	tenants []string
	queues  map[string][]*entry
}

func newDueQueues(due []*entry, turn int) dueQueues {
	q := dueQueues{queues: map[string][]*entry{}}
	for _, e := range due {
		tn := e.Tenant()
		if _, ok := q.queues[tn]; !ok {
			q.tenants = append(q.tenants, tn)
		}
		q.queues[tn] = append(q.queues[tn], e)
	}
	sort.Strings(q.tenants)
	if n := len(q.tenants); n > 0 {
		k := turn % n
		q.tenants = append(q.tenants[k:], q.tenants[:k]...)
	}
	for _, es := range q.queues {
		slices.SortFunc(es, func(a, b *entry) int {
			if c := a.dueAt.Compare(b.dueAt); c != 0 {
				return c
			}
			return strings.Compare(a.Key, b.Key)
		})
	}
	return q
}

// pop takes the next schedule of tenant, nil when none is left.
func (q dueQueues) pop(tenant string) *entry {
	es := q.queues[tenant]
	if len(es) == 0 {
		return nil
	}
	q.queues[tenant] = es[1:]
	return es[0]
}

// drop gives up tenant's remaining schedules for this pass.
func (q dueQueues) drop(tenant string) { delete(q.queues, tenant) }

// empty reports whether no schedule is left.
func (q dueQueues) empty() bool {
	for _, es := range q.queues {
		if len(es) > 0 {
			return false
		}
	}
	return true
}

package slots

import (
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // schedules name IANA zones; servers in minimal images have no zoneinfo

	"github.com/ax-sched/ax/task"
	"github.com/robfig/cron/v3"
)

func fieldError(field, msg string) error { return &task.FieldError{Field: field, Msg: msg} }

// cronParser reads six fields, seconds first; fiveFieldParser the
// classic five.
var (
	cronParser      = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	fiveFieldParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
)

// slotClock names the slots of a schedule: Next is the first slot strictly
// after t (zero when there is none within five years).
type slotClock interface{ Next(t time.Time) time.Time }

// Clock is a parsed cron expression in its time zone: it names the
// schedule's slots.
type Clock struct {
	clock slotClock
	loc   *time.Location
}

// Compile parses expr in the zone tz. Errors are *task.FieldError.
func Compile(expr, tz string) (Clock, error) {
	if tz == "Local" {
		return Clock{}, fieldError("timezone", "name an IANA zone such as Europe/Paris; Local differs between servers")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Clock{}, fieldError("timezone", fmt.Sprintf("unknown time zone %q", tz))
	}
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return Clock{}, fieldError("cron", "give the zone in the timezone field, not in the expression")
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every < time.Second || every%time.Second != 0 {
			return Clock{}, fieldError("cron", "@every takes a whole number of seconds, at least 1s")
		}
		return Clock{clock: everyClock(every / time.Second), loc: loc}, nil
	}
	p := cronParser
	if !strings.HasPrefix(expr, "@") {
		switch len(strings.Fields(expr)) {
		case 5:
			p = fiveFieldParser
		case 6:
		default:
			return Clock{}, fieldError("cron", "must have 6 fields (second minute hour day-of-month month day-of-week), or the classic 5 without seconds")
		}
	}
	s, err := p.Parse(expr)
	if err != nil {
		return Clock{}, fieldError("cron", err.Error())
	}
	return Clock{clock: s, loc: loc}, nil
}

// everyClock fires at the multiples of n seconds since the Unix epoch.
type everyClock int64

var _ slotClock = everyClock(1)

func (e everyClock) Next(t time.Time) time.Time {
	n := int64(e)
	s := t.Unix()
	if t.Before(time.Unix(s, 0)) { // Unix truncates toward zero before 1970
		s--
	}
	return time.Unix((floorDiv(s, n)+1)*n, 0).In(t.Location())
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Next is the first slot strictly after t (zero: none).
func (c Clock) Next(t time.Time) time.Time { return c.clock.Next(t.In(c.loc)) }

// Between returns the slots s with after < s ≤ through, oldest first, at
// most limit of them.
func (c Clock) Between(after, through time.Time, limit int) []time.Time {
	var out []time.Time
	for s := c.Next(after); !s.IsZero() && !s.After(through) && len(out) < limit; s = c.Next(s) {
		out = append(out, s)
	}
	return out
}

// NewestBefore returns the latest slot s with after < s < end. Cron has no
// "previous", but next is monotonic, so a binary search over seconds finds
// it in ~40 steps however long the gap.
func (c Clock) NewestBefore(after, end time.Time) (time.Time, bool) {
	first := c.Next(after)
	if first.IsZero() || !first.Before(end) {
		return time.Time{}, false
	}
	lo, hi := after, end // next(lo) < end ≤ next(hi)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if !mid.After(lo) {
			mid = lo.Add(time.Second)
		}
		if s := c.Next(mid); !s.IsZero() && s.Before(end) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return c.Next(lo), true
}

// Latest returns up to k of the most recent slots s with after < s < end,
// oldest first.
func (c Clock) Latest(after, end time.Time, k int) []time.Time {
	var out []time.Time
	for len(out) < k {
		s, ok := c.NewestBefore(after, end)
		if !ok {
			break
		}
		out = append(out, s)
		end = s
	}
	slices.Reverse(out)
	return out
}

// CountCap bounds how many skipped slots are counted for the metric: a
// schedule firing every second that missed a week is not walked slot by slot.
const CountCap = 10000

// Count is the number of slots s with after < s < end, at most CountCap.
func (c Clock) Count(after, end time.Time) int {
	n := 0
	for s := c.Next(after); !s.IsZero() && s.Before(end) && n < CountCap; s = c.Next(s) {
		n++
	}
	return n
}

// MinGap is the shortest interval between the next k slots after t.
func (c Clock) MinGap(t time.Time, k int) time.Duration {
	gap := time.Duration(1<<63 - 1)
	prev := c.Next(t)
	for i := 0; i < k && !prev.IsZero(); i++ {
		s := c.Next(prev)
		if s.IsZero() {
			break
		}
		gap = min(gap, s.Sub(prev))
		prev = s
	}
	return gap
}

// Loc is the clock's time zone.
func (c Clock) Loc() *time.Location { return c.loc }

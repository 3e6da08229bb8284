package region

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/google/go-cmp/cmp"
)

// The leader's limits carry each scheduled pool's window as it stands now:
// its slots inside a window (in the schedule's zone, 24:00 the day's end),
// closed outside every window; pools without a schedule add nothing, and
// the operator's limits come first.
func TestWindowLimitsFollowTheClock(t *testing.T) {
	berlin := &Schedule{Timezone: "Europe/Berlin", Windows: []ScheduleWindow{{Start: "20:00", End: "08:00", Slots: 7}}}
	day := &Schedule{Timezone: "UTC", Windows: []ScheduleWindow{{Start: "00:00", End: "24:00", Slots: 3}}}
	pools := []Pool{{Name: "plain"}, {Name: "night", Schedule: berlin}, {Name: "day", Schedule: day}}
	op := []queue.Limit{{Kind: queue.LimitKey, Name: "stripe", Concurrency: 5}}
	var now time.Time
	get := withWindows(func() []queue.Limit { return op }, pools, func() time.Time { return now })
	for _, c := range []struct {
		at   string
		want []queue.Limit
	}{
		{"2026-12-07T12:00:00Z", []queue.Limit{op[0], {Kind: queue.LimitPool, Name: "night", Closed: true}, {Kind: queue.LimitPool, Name: "day", Concurrency: 3}}},
		{"2026-12-07T19:30:00Z", []queue.Limit{op[0], {Kind: queue.LimitPool, Name: "night", Concurrency: 7}, {Kind: queue.LimitPool, Name: "day", Concurrency: 3}}},
		{"2026-12-07T23:59:00Z", []queue.Limit{op[0], {Kind: queue.LimitPool, Name: "night", Concurrency: 7}, {Kind: queue.LimitPool, Name: "day", Concurrency: 3}}},
	} {
		now, _ = time.Parse(time.RFC3339, c.at)
		if diff := cmp.Diff(c.want, get()); diff != "" {
			t.Errorf("at %s (-want +got)\n%s", c.at, diff)
		}
	}
	if withWindows(nil, []Pool{{Name: "plain"}}, time.Now) != nil {
		t.Error("no limits and no schedule: want none")
	}
}

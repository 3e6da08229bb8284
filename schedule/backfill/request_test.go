package backfill

import (
	"errors"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// hourly lists the whole hours after < s ≤ through.
func hourly(after, through time.Time, limit int) []time.Time {
	var out []time.Time
	for s := after.Truncate(time.Hour).Add(time.Hour); !s.After(through) && len(out) < limit; s = s.Add(time.Hour) {
		out = append(out, s)
	}
	return out
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		req   apiv1.BackfillRequest
		field string
		n     int
	}{
		{apiv1.BackfillRequest{From: "2026-03-01", To: "2026-03-01T19:00:00Z", MaxActive: 3}, "", 20},
		{apiv1.BackfillRequest{From: "2026-03-02", To: "2026-03-01"}, "from", 0},
		{apiv1.BackfillRequest{From: "yesterday", To: "2026-03-01"}, "from", 0},
		{apiv1.BackfillRequest{From: "2026-03-01", To: ""}, "to", 0},
		{apiv1.BackfillRequest{From: "2026-03-01", To: "2026-03-03"}, "to", 0}, // 49 periods > 40
		{apiv1.BackfillRequest{From: "2026-03-01", To: "2026-03-01", MaxActive: 101}, "max_active", 0},
		{apiv1.BackfillRequest{From: "2026-03-01T00:30:00Z", To: "2026-03-01T00:40:00Z"}, "to", 0},
	} {
		r, slots, err := Parse(&c.req, time.UTC, hourly, 40)
		var fe *task.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v", c.req, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%+v: %v, want a field error naming %s", c.req, err, c.field)
		case c.field == "" && (len(slots) != c.n || r.MaxActive != 3 || !slots[0].Equal(r.From)):
			t.Errorf("%+v: %d slots from %v (max_active %d), want %d from the first", c.req, len(slots), slots[0], r.MaxActive, c.n)
		}
	}
}

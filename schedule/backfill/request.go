package backfill

import (
	"fmt"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Bounds of max_active.
const (
	MaxActiveDefault = 1
	MaxActiveLimit   = 100
)

// Range is a validated request: the slots s with From ≤ s ≤ To, at most
// MaxActive running at once.
type Range struct {
	From, To  time.Time
	MaxActive int
}

// Slots lists a schedule's slots s with after < s ≤ through, oldest first,
// at most limit of them (the schedule's clock).
type Slots func(after, through time.Time, limit int) []time.Time

// Parse reads a backfill request for a schedule in loc whose slots are
// slots, allowing at most maxPeriods periods. Errors are *task.FieldError
// naming from, to or max_active. It returns the range and its slots.
func Parse(req *apiv1.BackfillRequest, loc *time.Location, slots Slots, maxPeriods int) (Range, []time.Time, error) {
	var r Range
	var err error
	if r.From, err = parseTime("from", req.From, loc); err != nil {
		return r, nil, err
	}
	if r.To, err = parseTime("to", req.To, loc); err != nil {
		return r, nil, err
	}
	if r.From.After(r.To) {
		return r, nil, &task.FieldError{Field: "from", Msg: fmt.Sprintf("%s is after to (%s)", req.From, req.To)}
	}
	switch {
	case req.MaxActive == 0:
		r.MaxActive = MaxActiveDefault
	case req.MaxActive < 1 || req.MaxActive > MaxActiveLimit:
		return r, nil, &task.FieldError{Field: "max_active", Msg: fmt.Sprintf("must be between 1 and %d", MaxActiveLimit)}
	default:
		r.MaxActive = req.MaxActive
	}
	got := slots(r.From.Add(-time.Nanosecond), r.To, maxPeriods+1)
	switch {
	case len(got) == 0:
		return r, nil, &task.FieldError{Field: "to", Msg: fmt.Sprintf("no slot of the schedule between %s and %s", req.From, req.To)}
	case len(got) > maxPeriods:
		return r, nil, &task.FieldError{Field: "to", Msg: fmt.Sprintf("the range holds more than %d periods, this tenant's max_backfill_periods: backfill a shorter range", maxPeriods)}
	}
	return r, got, nil
}

// ParseRerun reads a rerun request: the period's start must be a slot
// (isSlot). Errors name period.
func ParseRerun(req *apiv1.RerunRequest, loc *time.Location, isSlot func(time.Time) bool) (time.Time, error) {
	t, err := parseTime("period", req.Period, loc)
	if err != nil {
		return time.Time{}, err
	}
	if !isSlot(t) {
		return time.Time{}, &task.FieldError{Field: "period", Msg: fmt.Sprintf("%s is not a slot of the schedule: give a period's start", req.Period)}
	}
	return t, nil
}

// parseTime reads an RFC 3339 time or a date (midnight in loc).
func parseTime(field, v string, loc *time.Location) (time.Time, error) {
	if v == "" {
		return time.Time{}, &task.FieldError{Field: field, Msg: "is required: an RFC 3339 time or a date (2006-01-02)"}
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, v, loc); err == nil {
		return t, nil
	}
	return time.Time{}, &task.FieldError{Field: field, Msg: fmt.Sprintf("%q: give an RFC 3339 time or a date (2006-01-02)", v)}
}

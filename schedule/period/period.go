package period

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/ax-sched/ax/apiv1"
)

// Placeholders a task's payload may hold; Render replaces each inside the
// payload's JSON strings.
const (
	Start    = "{{period_start}}" // the period's start, RFC 3339 in the schedule's zone
	End      = "{{period_end}}"   // its end (the next slot), likewise
	Date     = "{{period_date}}"  // the start's date in the zone, 2006-01-02
	Schedule = "{{schedule}}"     // the schedule's name
)

// Of is the period of slot, whose next slot is next, in loc.
func Of(slot, next time.Time, loc *time.Location) apiv1.Period {
	return apiv1.Period{Start: slot.In(loc), End: next.In(loc)}
}

// Render returns payload with the placeholders replaced by p's values and
// the schedule's name. The values hold no character JSON escapes (names
// are DNS labels), so a placeholder inside a string stays a valid string.
// A payload without placeholders is returned as it is.
func Render(payload json.RawMessage, p apiv1.Period, schedule string) json.RawMessage {
	if !bytes.Contains(payload, []byte("{{")) {
		return payload
	}
	out := bytes.ReplaceAll(payload, []byte(Start), []byte(p.Start.Format(time.RFC3339)))
	out = bytes.ReplaceAll(out, []byte(End), []byte(p.End.Format(time.RFC3339)))
	out = bytes.ReplaceAll(out, []byte(Date), []byte(p.Start.Format(time.DateOnly)))
	return bytes.ReplaceAll(out, []byte(Schedule), []byte(schedule))
}

// Key is the period's mark in keys and flags: its start, RFC 3339 in UTC.
func Key(p apiv1.Period) string { return p.Start.UTC().Format(time.RFC3339) }

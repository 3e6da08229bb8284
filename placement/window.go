package placement

import (
	"fmt"
	"time"
)

const minutesPerDay = 24 * 60

// Window is a daily time-of-day interval [Start, End) in minutes since midnight. End < Start wraps
// past midnight (20:00–08:00 is Start 1200, End 480); End == Start is the whole day. Inside it the pool has Slots slots instead of
// its base; 0 withdraws all capacity (NO_CAPACITY_WINDOW).
type Window struct {
	Start int
	End   int
	Slots int
}

// CapacitySchedule is a pool's capacity by time of day, e.g. an inference pool of 8 GPUs that lends
// 7 to batch work at night: base Slots 1, Windows {20:00–08:00, Slots 7}.
type CapacitySchedule struct {
	// Location the windows are read in; nil means UTC.
	Location *time.Location
	// Windows must not overlap.
	Windows []Window
}

// ParseWindowEnd parses a window's end: "HH:MM" as ParseTimeOfDay, or "24:00", the end of the
// day, as 0 (a window ending at midnight; 00:00–24:00 is Start 0, End 0: the whole day).
func ParseWindowEnd(s string) (int, error) {
	if s == "24:00" {
		return 0, nil
	}
	return ParseTimeOfDay(s)
}

// ParseTimeOfDay parses "HH:MM" (00:00–23:59) into minutes since midnight.
func ParseTimeOfDay(s string) (int, error) {
	var h, m int
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("placement: time of day %q: want HH:MM", s)
	}
	for i, c := range []byte(s) {
		if i == 2 {
			continue
		}
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("placement: time of day %q: want HH:MM", s)
		}
	}
	h = int(s[0]-'0')*10 + int(s[1]-'0')
	m = int(s[3]-'0')*10 + int(s[4]-'0')
	if h > 23 || m > 59 {
		return 0, fmt.Errorf("placement: time of day %q: out of range", s)
	}
	return h*60 + m, nil
}

// Cap lowers every window's slots to at most n (the slots the pool's live workers run); a nil
// schedule stays nil. Windows of 0 slots stay closed.
func (cs *CapacitySchedule) Cap(n int) {
	if cs == nil {
		return
	}
	for i := range cs.Windows {
		cs.Windows[i].Slots = min(cs.Windows[i].Slots, max(n, 0))
	}
}

// SlotsAt returns the pool's slots at now: the slots of the window now falls in (inWindow true),
// or base outside every window. A nil schedule always returns base.
func (cs *CapacitySchedule) SlotsAt(now time.Time, base int) (slots int, inWindow bool) {
	if cs == nil || len(cs.Windows) == 0 {
		return base, false
	}
	loc := cs.Location
	if loc == nil {
		loc = time.UTC
	}
	h, m, _ := now.In(loc).Clock()
	minute := h*60 + m
	for _, w := range cs.Windows {
		if w.contains(minute) {
			return w.Slots, true
		}
	}
	return base, false
}

func (w Window) contains(minute int) bool {
	if w.Start < w.End {
		return w.Start <= minute && minute < w.End
	}
	return minute >= w.Start || minute < w.End
}

func (cs *CapacitySchedule) validate() error {
	if cs == nil {
		return nil
	}
	// Each window as one or two [from, to) spans of the day, checked against the earlier ones:
	// a snapshot validates every pool's schedule, so this must not walk the day's minutes.
	type span struct{ from, to, window int }
	var spans []span
	for i, w := range cs.Windows {
		switch {
		case w.Start < 0 || w.Start >= minutesPerDay || w.End < 0 || w.End >= minutesPerDay:
			return fmt.Errorf("window %d: start and end must be minutes in [0, %d)", i, minutesPerDay)
		case w.Slots < 0:
			return fmt.Errorf("window %d: slots %d < 0", i, w.Slots)
		}
		own := []span{{w.Start, w.End, i}}
		switch {
		case w.End == w.Start:
			own = []span{{0, minutesPerDay, i}}
		case w.End < w.Start:
			own = []span{{w.Start, minutesPerDay, i}, {0, w.End, i}}
		}
		for _, a := range own {
			for _, b := range spans {
				if a.from < b.to && b.from < a.to {
					return fmt.Errorf("window %d overlaps an earlier window", i)
				}
			}
		}
		spans = append(spans, own...)
	}
	return nil
}

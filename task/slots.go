package task

import (
	"encoding/json"
	"fmt"
	"math"
)

// MilliSlots is how many units a whole slot holds: a spec's slots is a
// multiple of 1/MilliSlots, stored and counted (worker room, claims) as
// an integer number of units.
const MilliSlots = 1000

// Slots is the share of one worker slot a task holds while it runs
// (Spec.Slots): 0 < Slots <= 1 in steps of 1/MilliSlots; 0 (left out) is a
// whole slot. A worker with N slots runs tasks whose slots sum to at most N.
type Slots float64

// UnmarshalJSON reads a number; an explicit 0 decodes as -1, which
// Normalize refuses (0 is not a size a task may ask for; leave it out).
func (v *Slots) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("slots must be a number")
	}
	if f == 0 {
		f = -1
	}
	*v = Slots(f)
	return nil
}

// SlotMilli is the spec's slots in units of 1/MilliSlots: MilliSlots (a
// whole slot) when the spec leaves slots out.
func (s *Spec) SlotMilli() int { return Milli(s.Slots) }

// SlotMilli is the task's slots in units of 1/MilliSlots (MilliSlots: a
// whole slot).
func (t *Task) SlotMilli() int { return Milli(t.Slots) }

// Milli turns a spec's slots into units of 1/MilliSlots; 0 (left out) is
// a whole slot.
func Milli(slots Slots) int {
	if slots <= 0 {
		return MilliSlots
	}
	return int(math.Round(float64(slots) * MilliSlots))
}

// normalizeSlots checks slots: more than 0, at most 1, a multiple of
// 1/MilliSlots. A whole slot (1) is stored as left out (0), so the two
// specs are the same task for idempotency.
func (s *Spec) normalizeSlots() error {
	v := float64(s.Slots)
	if v == 0 {
		return nil
	}
	m := v * MilliSlots
	if math.IsNaN(v) || v < 0 || v > 1 || math.Abs(m-math.Round(m)) > 1e-6 || math.Round(m) < 1 {
		return fieldErr("slots", "must be a fraction of one slot from 0.001 to 1, in steps of 0.001 (left out: 1)")
	}
	if math.Round(m) == MilliSlots {
		s.Slots = 0
	}
	return nil
}

package placement

import (
	"testing"
	"time"
)

// 00:00–24:00 is the whole day: every minute is inside, nothing else fits.
func TestWholeDayWindow(t *testing.T) {
	end, err := ParseWindowEnd("24:00")
	if err != nil || end != 0 {
		t.Fatalf("ParseWindowEnd(24:00) = %d, %v", end, err)
	}
	cs := &CapacitySchedule{Windows: []Window{{Start: 0, End: end, Slots: 3}}}
	if err := cs.validate(); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"00:00", "07:59", "12:00", "23:59"} {
		tod, _ := time.Parse("15:04", at)
		if slots, in := cs.SlotsAt(tod, 9); !in || slots != 3 {
			t.Errorf("at %s: %d slots, in %v; want the window's 3", at, slots, in)
		}
	}
	cs.Windows = append(cs.Windows, Window{Start: 60, End: 120, Slots: 1})
	if err := cs.validate(); err == nil {
		t.Fatal("a window beside the whole day validated")
	}
}

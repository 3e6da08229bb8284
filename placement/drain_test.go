package placement

import (
	"math"
	"testing"
	"time"
)

func TestDrainMeter(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	t.Run("saturated pace", func(t *testing.T) {
		// 10 slots, fully busy, 1 task a second: 1/s.
		m := NewDrainMeter(10 * time.Minute)
		var got float64
		for s := 0; s <= 60; s++ {
			got = m.Observe(at(s), int64(100+s), 10, 10)
			if s < 30 && got != 0 {
				t.Fatalf("at %d s: rate %v before a window's worth of readings", s, got)
			}
		}
		if math.Abs(got-1) > 1e-9 {
			t.Fatalf("rate %v, want 1", got)
		}
	})
	t.Run("half busy reads the saturated pace", func(t *testing.T) {
		// 5 of 10 slots busy finish 1 task a second: all 10 would finish 2.
		m := NewDrainMeter(10 * time.Minute)
		var got float64
		for s := 0; s <= 60; s++ {
			got = m.Observe(at(s), int64(s), 5, 10)
		}
		if math.Abs(got-2) > 1e-9 {
			t.Fatalf("rate %v, want 2", got)
		}
	})
	t.Run("slow pool widens the window", func(t *testing.T) {
		// One completion every 6 s: 30 s hold 5, the window grows to 20 runs (120 s).
		m := NewDrainMeter(10 * time.Minute)
		var got float64
		for s := 0; s <= 300; s++ {
			got = m.Observe(at(s), int64(s/6), 7, 7)
		}
		if math.Abs(got-1.0/6) > 0.01 {
			t.Fatalf("rate %v, want 1/6", got)
		}
		if first := m.samples[m.head].at; at(300).Sub(first) > 10*time.Minute {
			t.Fatalf("kept samples since %v", first)
		}
	})
	t.Run("idle pool: unknown", func(t *testing.T) {
		m := NewDrainMeter(10 * time.Minute)
		var got float64
		for s := 0; s <= 60; s++ {
			got = m.Observe(at(s), 7, 0, 10)
		}
		if got != 0 {
			t.Fatalf("rate %v of an idle pool", got)
		}
	})
	t.Run("a drop restarts", func(t *testing.T) {
		m := NewDrainMeter(10 * time.Minute)
		for s := 0; s <= 60; s++ {
			m.Observe(at(s), int64(1000+s), 4, 4)
		}
		if got := m.Observe(at(61), 3, 4, 4); got != 0 {
			t.Fatalf("rate %v right after the count dropped", got)
		}
	})
}

package placement

import (
	"math"
	"testing"
	"time"
)

func TestDrainMeter(t *testing.T) {
	m := NewDrainMeter(30 * time.Second)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []struct {
		sec   int
		count int64
		want  float64
	}{
		{0, 100, 0},          // one reading: no rate yet
		{10, 150, 5},         // 50 in 10 s
		{20, 150, 2.5},       // nothing more: 50 in 20 s
		{30, 250, 5},         // 150 in 30 s
		{40, 250, 100. / 30}, // the window slid past the first reading: 100 in (40−10) s
		{45, 10, 0},          // a drop (store restarted): the measure restarts
		{46, 16, 6},
	}
	for _, s := range steps {
		if got := m.Observe(at(s.sec), s.count); math.Abs(got-s.want) > 1e-9 {
			t.Fatalf("at %d s count %d: rate %v, want %v", s.sec, s.count, got, s.want)
		}
	}
}

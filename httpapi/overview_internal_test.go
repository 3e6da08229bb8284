package httpapi

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/region"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestWindowStatus(t *testing.T) {
	ams, err := time.LoadLocation("Europe/Amsterdam")
	if err != nil {
		t.Fatal(err)
	}
	night := &region.Schedule{Timezone: "Europe/Amsterdam", Windows: []region.ScheduleWindow{{Start: "20:00", End: "08:00", Slots: 7}}}
	at := func(d, h, m int) time.Time { return time.Date(2026, 12, d, h, m, 0, 0, ams) }
	ptr := func(t time.Time) *time.Time { return &t }
	for _, c := range []struct {
		name string
		s    *region.Schedule
		now  time.Time
		want *apiv1.CapacityWindow
	}{
		{"no schedule", nil, at(1, 12, 0), nil},
		{"inside the night window", night, at(1, 21, 30).Add(17 * time.Second),
			&apiv1.CapacityWindow{Open: true, Slots: 7, Window: "20:00–08:00", Timezone: "Europe/Amsterdam", NextChange: ptr(at(2, 8, 0))}},
		{"after midnight, still inside", night, at(2, 3, 0),
			&apiv1.CapacityWindow{Open: true, Slots: 7, Window: "20:00–08:00", Timezone: "Europe/Amsterdam", NextChange: ptr(at(2, 8, 0))}},
		{"by day: closed until 20:00", night, at(1, 8, 0),
			&apiv1.CapacityWindow{Timezone: "Europe/Amsterdam", NextChange: ptr(at(1, 20, 0))}},
		{"a window with no slots is closed", &region.Schedule{Timezone: "UTC", Windows: []region.ScheduleWindow{{Start: "00:00", End: "12:00", Slots: 0}}},
			time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC),
			&apiv1.CapacityWindow{Window: "00:00–12:00", Timezone: "UTC", NextChange: ptr(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}},
		{"the whole day: open, no change to come", &region.Schedule{Timezone: "UTC", Windows: []region.ScheduleWindow{{Start: "00:00", End: "24:00", Slots: 3}}},
			time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC),
			&apiv1.CapacityWindow{Open: true, Slots: 3, Window: "00:00–24:00", Timezone: "UTC"}},
		{"to the end of the day", &region.Schedule{Timezone: "UTC", Windows: []region.ScheduleWindow{{Start: "18:00", End: "24:00", Slots: 2}}},
			time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC),
			&apiv1.CapacityWindow{Open: true, Slots: 2, Window: "18:00–24:00", Timezone: "UTC", NextChange: ptr(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := windowStatus(c.s, c.now.UTC())
			if got != nil && got.NextChange != nil {
				*got.NextChange = got.NextChange.In(ams)
			}
			if c.want != nil && c.want.NextChange != nil {
				*c.want.NextChange = c.want.NextChange.In(ams)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Fatalf("-want +got:\n%s", d)
			}
		})
	}
}

func TestRefusalMeter(t *testing.T) {
	reg := prometheus.NewRegistry()
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_tasks_rejected_total"}, []string{"region", "reason"})
	byPool := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ax_pool_refusals_total"}, []string{"region", "target", "pool"})
	reg.MustRegister(rejected, byPool)
	rejected.WithLabelValues("r1", "saturated").Add(5)
	rejected.WithLabelValues("r2", "saturated").Add(100) // another region's series: not ours
	byPool.WithLabelValues("r1", "r1", "gpu").Add(5)
	byPool.WithLabelValues("r2", "r1", "gpu").Add(100) // another region's server's count
	m := &refusalMeter{gather: reg, region: "r1"}
	t0 := time.Unix(1_800_000_000, 0)
	if got := m.perMinute(t0); got.byReason["saturated"] != 0 || got.pool("r1", "gpu") != 0 || got.byPool == nil {
		t.Fatalf("one sample, the base: %+v, want zero rates", got)
	}
	rejected.WithLabelValues("r1", "saturated").Add(10)
	rejected.WithLabelValues("r1", "unplaceable").Add(1)
	byPool.WithLabelValues("r1", "r1", "gpu").Add(10)
	byPool.WithLabelValues("r1", "r2", "gpu").Add(5) // a pool of another region, saturated for our submits
	// Watched for less than a minute: the count seen, not extrapolated.
	got := m.perMinute(t0.Add(30 * time.Second))
	if d := cmp.Diff(map[string]float64{"saturated": 10, "unplaceable": 1}, got.byReason); d != "" {
		t.Fatalf("-want +got:\n%s", d)
	}
	if g1, g2, cpu := got.pool("r1", "gpu"), got.pool("r2", "gpu"), got.pool("r1", "cpu"); g1 != 10 || g2 != 5 || cpu != 0 {
		t.Fatalf("per pool: r1/gpu %v r2/gpu %v r1/cpu %v, want 10 5 0", g1, g2, cpu)
	}
	// Over two minutes: per minute.
	rejected.WithLabelValues("r1", "saturated").Add(40)
	if got := m.perMinute(t0.Add(150 * time.Second)); got.byReason["saturated"] != 20 {
		t.Fatalf("40 in the two minutes since the last base: %+v, want 20 a minute", got)
	}
	// A minute later with nothing new: the old refusals leave the rate.
	if got := m.perMinute(t0.Add(5 * time.Minute)); got.byReason["saturated"] != 0 || got.pool("r1", "gpu") != 0 || got.byPool == nil {
		t.Fatalf("after a quiet minute: %+v", got)
	}
}

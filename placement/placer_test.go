package placement

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the window tests need zones regardless of the host's zoneinfo
)

func TestPlaceCheapestEligible(t *testing.T) {
	use1 := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")        // 0.192/4 = 0.0480
	usc1 := cpuPool(t, "gcp", "us-central1", "n2-standard-4")   // 0.19424/4 = 0.04856
	euw1 := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")        // 0.214/4 = 0.0535
	apne1 := cpuPool(t, "aws", "ap-northeast-1", "m6i.xlarge")  // 0.248/4 = 0.0620
	l4use1 := gpuPool(t, "aws", "us-east-1", "g6.xlarge")       // 0.8048
	l4apne1 := gpuPool(t, "aws", "ap-northeast-1", "g6.xlarge") // 1.1672
	cpus := []Pool{apne1, euw1, usc1, use1}

	tests := []struct {
		name    string
		pools   []Pool
		task    Task
		cfg     func(*Config)
		observe func(*Estimator)
		want    string
	}{
		{name: "cheapest", pools: cpus, task: cpuTask(), want: "us-east-1/m6i.xlarge"},
		{
			name: "discount applies", task: cpuTask(), want: "eu-west-1/m6i.xlarge",
			pools: []Pool{use1, with(euw1, func(p *Pool) { p.Discount = 0.2 })}, // 0.0428
		},
		{
			name: "spot price", task: cpuTask(), want: "us-central1/n2-standard-4",
			pools: []Pool{use1, with(usc1, func(p *Pool) {
				p.PricePerSlotHour, p.Spot = priceOf(t, "gcp", "us-central1", "n2-standard-4").spot/4, true
			})},
		},
		{
			name: "regions restrict", pools: cpus, want: "us-central1/n2-standard-4",
			task: Task{Type: "etl", Regions: []string{"eu-west-1", "us-central1"}},
		},
		{
			name: "tags select gpu pools", want: "us-east-1/g6.xlarge",
			pools: append(slices.Clone(cpus), l4apne1, l4use1),
			task:  Task{Type: "infer", Tags: map[string]string{"gpu": "L4"}},
		},
		{
			name: "cross-region penalty keeps home", pools: cpus, want: "eu-west-1/m6i.xlarge",
			task: Task{Type: "etl", Home: "eu-west-1"},
			cfg:  func(c *Config) { c.CrossRegionPenalty = 0.0001 }, // > (0.0535-0.048)/3600
		},
		{
			name: "learnt durations", pools: cpus, task: cpuTask(), want: "eu-west-1/m6i.xlarge",
			observe: func(e *Estimator) {
				e.Observe("", "etl", use1.Key(), 2*time.Hour) // 0.096 USD
				e.Observe("", "etl", usc1.Key(), 2*time.Hour)
				e.Observe("", "etl", apne1.Key(), 2*time.Hour)
				e.Observe("", "etl", euw1.Key(), time.Hour) // 0.0535 USD
			},
		},
		{
			name: "unknown duration uses the default", pools: cpus, task: cpuTask(), want: "us-east-1/m6i.xlarge",
			cfg: func(c *Config) { c.DefaultDuration = time.Hour },
			observe: func(e *Estimator) {
				e.Observe("", "etl", euw1.Key(), 30*time.Minute) // 0.02675 USD vs 0.048 for the default
				e.Observe("", "etl", use1.Key(), 20*time.Minute) // 0.016 USD
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			est := mustEstimator(t, cfg)
			if tt.observe != nil {
				tt.observe(est)
			}
			s := mustSnapshot(t, tt.pools...)
			d := mustPlacer(t, cfg, est).Place(s, tt.task, t0)
			if got := key(d); got != tt.want {
				t.Fatalf("placed in %s, want %s", got, tt.want)
			}
			if d.Err() != nil || tt.pools[d.Index].Key() != tt.want {
				t.Fatalf("decision %+v: err %v, index does not name the pool", d, d.Err())
			}
		})
	}
}

func TestFilterReasons(t *testing.T) {
	base := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	named := func(name string, f func(*Pool)) Pool {
		return with(base, func(p *Pool) { p.Name = name; p.PricePerSlotHour += 0.001; f(p) })
	}
	pools := []Pool{
		named("tag", func(p *Pool) { p.Tags = map[string]string{"class": "cpu", "arch": "arm64"} }),
		named("region", func(p *Pool) { p.Region = "eu-west-1" }),
		named("unhealthy", func(p *Pool) { p.RegionHealthy = false }),
		named("stale", func(p *Pool) { p.UpdatedAt = t0.Add(-15*time.Second - time.Nanosecond) }),
		named("fresh-at-limit", func(p *Pool) { p.UpdatedAt = t0.Add(-15 * time.Second); p.PricePerSlotHour += 1 }),
		named("never-published", func(p *Pool) { p.UpdatedAt = time.Time{} }),
		named("local-old", func(p *Pool) { p.UpdatedAt = t0.Add(-time.Hour); p.Local = true; p.PricePerSlotHour += 1 }),
		named("no-slots", func(p *Pool) { p.Slots = 0 }),
		named("scale-from-zero", func(p *Pool) { p.Slots, p.Running, p.ScaleFromZero = 0, 0, true; p.PricePerSlotHour += 1 }),
		named("window-closed", func(p *Pool) {
			p.Window = &CapacitySchedule{Windows: []Window{{Start: 11 * 60, End: 13 * 60, Slots: 0}}}
		}),
		named("saturated", func(p *Pool) { p.Running, p.Ready = p.Slots, 950 }),
		named("no-handler", func(p *Pool) { p.Types = []string{"report", "etl.v2"} }),
		named("serves-none", func(p *Pool) { p.Types = []string{} }),
		named("no-slots-no-handler", func(p *Pool) { p.Slots, p.Types = 0, []string{"report"} }),
		named("handler", func(p *Pool) { p.Types = []string{"report", "etl"}; p.PricePerSlotHour += 1 }),
		named("winner", func(*Pool) {}),
	}
	want := map[string]Reason{
		"tag": ReasonTagMismatch, "region": ReasonRegionExcluded, "unhealthy": ReasonUnhealthy,
		"stale": ReasonStaleStatus, "fresh-at-limit": "", "never-published": ReasonStaleStatus,
		"local-old": "", "no-slots": ReasonNoSlots, "scale-from-zero": "", "window-closed": ReasonNoCapacityWindow,
		"saturated": ReasonSaturated, "winner": "",
		"no-handler": ReasonNoHandler, "serves-none": ReasonNoHandler, "no-slots-no-handler": ReasonNoSlots, "handler": "",
	}
	task := Task{Type: "etl", Tags: map[string]string{"arch": "amd64"}, Regions: []string{"us-east-1"}}
	p := mustPlacer(t, DefaultConfig(), nil)
	s := mustSnapshot(t, pools...)
	exp := p.Explain(s, task, t0)
	if len(exp.Candidates) != len(pools) {
		t.Fatalf("%d candidates, want %d", len(exp.Candidates), len(pools))
	}
	for i, c := range exp.Candidates {
		if c.Index != i || c.Pool != pools[i].Name {
			t.Errorf("candidate %d is %+v, want pool %s in input order", i, c, pools[i].Name)
		}
		if c.Reason != want[c.Pool] {
			t.Errorf("%s: reason %q, want %q", c.Pool, c.Reason, want[c.Pool])
		}
		if c.Won != (c.Pool == "winner") {
			t.Errorf("%s: won = %v", c.Pool, c.Won)
		}
	}
	if d := p.Place(s, task, t0); d.Pool != "winner" || d != exp.Decision {
		t.Fatalf("Place = %+v, Explain decided %+v", d, exp.Decision)
	}
}

func TestCapacityWindow(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	// An inference pool of 8 L4s keeps one for itself and lends 7 to batch work from 20:00 to
	// 08:00 Tokyo time, at half its list price. It keeps no queue for batch work, so by day, with
	// its one slot busy, it has no headroom and batch work goes to the dedicated pool.
	l4 := gpuPool(t, "aws", "ap-northeast-1", "g6.xlarge")
	inference := with(l4, func(p *Pool) {
		p.Name, p.Discount = "l4-inference", 0.5
		p.Slots, p.Running, p.Ready, p.QueueCapacity = 1, 1, 0, 0
		p.Window = &CapacitySchedule{Location: tokyo, Windows: []Window{{Start: 20 * 60, End: 8 * 60, Slots: 7}}}
	})
	batch := with(l4, func(p *Pool) { p.Name, p.Slots, p.Running = "l4-batch", 8, 0 })
	cfg := DefaultConfig()
	cfg.StaleAfter = 48 * time.Hour // one snapshot across the day: the Placer must notice the edges
	p := mustPlacer(t, cfg, nil)
	s := mustSnapshot(t, batch, inference)
	task := Task{Type: "batch", Tags: map[string]string{"gpu": "L4"}}

	day := func(d, h, m, sec int) time.Time { return time.Date(2026, 11, d, h, m, sec, 0, tokyo) }
	steps := []struct {
		at     time.Time
		want   string
		reason Reason // of the inference pool
	}{
		{day(29, 19, 59, 59), "l4-batch", ReasonSaturated},
		{day(29, 20, 0, 0), "l4-inference", ""},
		{day(30, 0, 30, 0), "l4-inference", ""},
		{day(30, 7, 59, 59), "l4-inference", ""},
		{day(30, 8, 0, 0), "l4-batch", ReasonSaturated},
		{day(29, 23, 0, 0), "l4-inference", ""}, // time going backwards is honoured too
		{day(30, 8, 0, 0).In(time.UTC), "l4-batch", ReasonSaturated},
	}
	for _, st := range steps {
		exp := p.Explain(s, task, st.at)
		if got := exp.Decision.Pool; got != st.want {
			t.Fatalf("%v: chose %s, want %s", st.at, got, st.want)
		}
		if got := exp.Candidates[1].Reason; got != st.reason {
			t.Fatalf("%v: inference pool reason %q, want %q", st.at, got, st.reason)
		}
	}

	// A window of 0 slots takes the pool out, whatever its base.
	closed := with(inference, func(p *Pool) {
		p.Running = 0
		p.Window = &CapacitySchedule{Location: tokyo, Windows: []Window{{Start: 9 * 60, End: 17 * 60, Slots: 0}}}
	})
	s = mustSnapshot(t, batch, closed)
	if c := p.Explain(s, task, day(30, 12, 0, 0)).Candidates[1]; c.Reason != ReasonNoCapacityWindow {
		t.Fatalf("closed window: reason %q", c.Reason)
	}
	if d := p.Place(s, task, day(30, 17, 0, 0)); d.Pool != "l4-inference" {
		t.Fatalf("after the closed window: chose %s", d.Pool)
	}
}

func TestSlotsAt(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	night := &CapacitySchedule{Windows: []Window{{Start: 20 * 60, End: 8 * 60, Slots: 7}}}
	split := &CapacitySchedule{Location: ny, Windows: []Window{
		{Start: 1*60 + 30, End: 3*60 + 30, Slots: 5},
		{Start: 12 * 60, End: 13 * 60, Slots: 0},
	}}
	tests := []struct {
		name   string
		cs     *CapacitySchedule
		at     time.Time
		slots  int
		inside bool
	}{
		{"nil schedule", nil, t0, 1, false},
		{"before wrap window", night, time.Date(2026, 1, 1, 19, 59, 0, 0, time.UTC), 1, false},
		{"window start", night, time.Date(2026, 1, 1, 20, 0, 0, 0, time.UTC), 7, true},
		{"after midnight", night, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), 7, true},
		{"last minute", night, time.Date(2026, 1, 2, 7, 59, 59, 0, time.UTC), 7, true},
		{"window end", night, time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC), 1, false},
		{"zone: 12:30 New York is 17:30 UTC", split, time.Date(2026, 1, 5, 17, 30, 0, 0, time.UTC), 0, true},
		{"zone: 13:00 New York", split, time.Date(2026, 1, 5, 18, 0, 0, 0, time.UTC), 1, false},
		// 2026-03-08: New York clocks jump from 02:00 to 03:00; 03:15 EDT is 07:15 UTC.
		{"DST day, inside", split, time.Date(2026, 3, 8, 7, 15, 0, 0, time.UTC), 5, true},
		{"DST day, 03:30 EDT", split, time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC), 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slots, inside := tt.cs.SlotsAt(tt.at, 1)
			if slots != tt.slots || inside != tt.inside {
				t.Fatalf("SlotsAt = %d, %v; want %d, %v", slots, inside, tt.slots, tt.inside)
			}
		})
	}
}

func TestParseTimeOfDay(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  bool
	}{
		{"00:00", 0, false}, {"08:00", 480, false}, {"20:00", 1200, false}, {"23:59", 1439, false},
		{"24:00", 0, true}, {"12:60", 0, true}, {"8:00", 0, true}, {"08-00", 0, true}, {"0a:00", 0, true}, {"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseTimeOfDay(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseTimeOfDay(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestSaturationSpills(t *testing.T) {
	use1 := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	euw1 := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")
	apne1 := cpuPool(t, "aws", "ap-northeast-1", "m6i.xlarge")
	tests := []struct {
		name       string
		ready, run int
		want       string
		reason     Reason
	}{
		{name: "below soft", ready: 500, run: 50, want: "us-east-1/m6i.xlarge", reason: ""},
		// fill 0.9, under the 0.95 hard watermark: no penalty, so the cheapest keeps the work.
		{name: "below the hard watermark the cheapest keeps it", ready: 900, run: 100, want: "us-east-1/m6i.xlarge"},
		{name: "saturated", ready: 950, run: 100, want: "eu-west-1/m6i.xlarge", reason: ReasonSaturated},
		// One free slot is headroom, so not SATURATED, but the fill still costs the maximum penalty.
		{name: "full queue but a free slot", ready: 950, run: 99, want: "eu-west-1/m6i.xlarge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cheap := with(use1, func(p *Pool) { p.Ready, p.Running = tt.ready, tt.run })
			p := mustPlacer(t, DefaultConfig(), nil)
			exp := p.Explain(mustSnapshot(t, apne1, euw1, cheap), cpuTask(), t0)
			if got := key(exp.Decision); got != tt.want {
				t.Fatalf("chose %s, want %s", got, tt.want)
			}
			if got := exp.Candidates[2].Reason; got != tt.reason {
				t.Fatalf("cheapest pool: reason %q, want %q", got, tt.reason)
			}
		})
	}
}

func TestCriticalAdmittedToSaturated(t *testing.T) {
	full := func(p *Pool) { p.Running, p.Ready = p.Slots, 980 }
	pools := []Pool{
		with(cpuPool(t, "aws", "eu-west-1", "m6i.xlarge"), full),
		with(cpuPool(t, "aws", "us-east-1", "m6i.xlarge"), full),
	}
	s := mustSnapshot(t, pools...)
	cfg := DefaultConfig()
	p := mustPlacer(t, cfg, nil)

	d := p.Place(s, cpuTask(), t0)
	if d.OK || !d.AllSaturated() || d.Unplaceable() || !errors.Is(d.Err(), ErrSaturated) || !errors.Is(d.Err(), ErrNoCandidate) {
		t.Fatalf("non-critical: %+v err %v, want all saturated", d, d.Err())
	}
	crit := cpuTask()
	crit.Critical = true
	exp := p.Explain(s, crit, t0)
	if got := key(exp.Decision); got != "us-east-1/m6i.xlarge" {
		t.Fatalf("critical: chose %s", got)
	}
	for _, c := range exp.Candidates {
		if c.Reason != "" || c.Penalty != cfg.PenaltyMax {
			t.Errorf("critical: %s reason %q penalty %v, want admitted at %v", c.Pool, c.Reason, c.Penalty, cfg.PenaltyMax)
		}
	}
	if d := p.Place(s, crit, t0); !d.OK || d.Err() != nil {
		t.Fatalf("critical Place: %+v", d)
	}
}

func TestOutcomes(t *testing.T) {
	use1 := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	euw1 := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")
	saturate := func(p *Pool) { p.Running, p.Ready = p.Slots, 990 }
	staleF := func(p *Pool) { p.UpdatedAt = t0.Add(-time.Minute) }
	tests := []struct {
		name  string
		pools []Pool
		task  Task
		want  error
	}{
		{"tags match no pool", []Pool{use1, euw1}, Task{Tags: map[string]string{"gpu": "A100"}}, ErrUnplaceable},
		{"tag value differs", []Pool{use1, euw1}, Task{Tags: map[string]string{"arch": "arm64"}}, ErrUnplaceable},
		{"regions exclude every pool", []Pool{use1, euw1}, Task{Regions: []string{"mars-1"}}, ErrUnplaceable},
		{
			"tags or regions exclude each pool", []Pool{use1, with(euw1, func(p *Pool) { p.Tags = nil })},
			Task{Tags: map[string]string{"class": "cpu"}, Regions: []string{"eu-west-1"}}, ErrUnplaceable,
		},
		{"no pools at all", nil, cpuTask(), ErrNoCapacity},
		{"all saturated", []Pool{with(use1, saturate), with(euw1, saturate)}, cpuTask(), ErrSaturated},
		{"matching ones saturated", []Pool{with(use1, saturate), with(euw1, func(p *Pool) { p.Tags = nil })}, cpuTask(), ErrSaturated},
		{"saturated and stale", []Pool{with(use1, saturate), with(euw1, staleF)}, cpuTask(), ErrNoCapacity},
		{"all stale", []Pool{with(use1, staleF), with(euw1, staleF)}, cpuTask(), ErrNoCapacity},
		{"unhealthy and no slots", []Pool{
			with(use1, func(p *Pool) { p.RegionHealthy = false }),
			with(euw1, func(p *Pool) { p.Slots = 0 }),
		}, cpuTask(), ErrNoCapacity},
		{"placed", []Pool{with(use1, saturate), euw1}, cpuTask(), nil},
		// A worker that serves the type may come: NO_HANDLER is never unplaceable.
		{"no pool serves the type", []Pool{with(use1, serves("report")), with(euw1, serves())}, cpuTask(), ErrNoCapacity},
		{"the serving pool saturated", []Pool{with(use1, serves("report")), with(euw1, saturate)}, cpuTask(), ErrNoCapacity},
		{"the serving pool placed", []Pool{with(use1, serves("report")), with(euw1, serves("etl"))}, cpuTask(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSnapshot(t, tt.pools...)
			p := mustPlacer(t, DefaultConfig(), nil)
			exp := p.Explain(s, tt.task, t0)
			d := p.Place(s, tt.task, t0)
			if d != exp.Decision {
				t.Fatalf("Place %+v != Explain %+v", d, exp.Decision)
			}
			if !errors.Is(d.Err(), tt.want) || (tt.want != nil) == d.OK {
				t.Fatalf("Err() = %v, OK %v; want %v", d.Err(), d.OK, tt.want)
			}
			if d.Unplaceable() != (tt.want == ErrUnplaceable) || d.AllSaturated() != (tt.want == ErrSaturated) {
				t.Fatalf("Unplaceable %v AllSaturated %v for %v", d.Unplaceable(), d.AllSaturated(), tt.want)
			}
			if !d.OK && (d.Index != -1 || d.Pool != "") {
				t.Fatalf("failed decision names a pool: %+v", d)
			}
		})
	}
}

func TestZeroDecisionIsAFailure(t *testing.T) {
	var d Decision
	if d.OK || d.Err() != ErrNoCapacity || d.Unplaceable() || d.AllSaturated() {
		t.Fatalf("zero Decision: OK %v, Err %v", d.OK, d.Err())
	}
}

func TestTieBreak(t *testing.T) {
	// The catalog prices these three at exactly 0.048 per vCPU-hour, and their fill is the same:
	// the lower region, then the lower name, wins.
	pools := []Pool{
		cpuPool(t, "azure", "westus2", "Standard_D4s_v5"),
		cpuPool(t, "aws", "us-east-1", "m6i.xlarge"),
		cpuPool(t, "azure", "eastus", "Standard_D4s_v5"),
		with(cpuPool(t, "azure", "eastus", "Standard_D4s_v5"), func(p *Pool) { p.Name = "Standard_D4s_v5-b" }),
	}
	const want = "eastus/Standard_D4s_v5"
	for _, perm := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}} {
		var ps []Pool
		for _, i := range perm {
			ps = append(ps, pools[i])
		}
		s := mustSnapshot(t, ps...)
		p := mustPlacer(t, DefaultConfig(), nil)
		exp := p.Explain(s, cpuTask(), t0)
		if d := p.Place(s, cpuTask(), t0); key(d) != want || d != exp.Decision {
			t.Fatalf("order %v: Place chose %s, Explain %s; want %s", perm, key(d), key(exp.Decision), want)
		}
		if c := exp.Candidates[exp.Decision.Index]; !c.Won || c.Cost != exp.Decision.Cost {
			t.Fatalf("order %v: winner candidate %+v", perm, c)
		}
	}
}

func TestTieAcrossHomeAndForeignPools(t *testing.T) {
	// With a cross-region penalty the walk visits home pools, then foreign ones; an exact tie
	// between the two must still go to the pool first in snapshot order (lower published cost).
	cfg := DefaultConfig()
	cfg.DefaultDuration, cfg.CrossRegionPenalty = time.Hour, 0.25
	foreign := with(cpuPool(t, "aws", "eu-west-1", "m6i.xlarge"), func(p *Pool) { p.PricePerSlotHour = 0.25 })
	home := with(cpuPool(t, "aws", "us-east-1", "m6i.xlarge"), func(p *Pool) { p.PricePerSlotHour = 0.5 })
	s := mustSnapshot(t, home, foreign)
	p := mustPlacer(t, cfg, nil)
	task := Task{Type: "etl", Home: "us-east-1"}
	exp := p.Explain(s, task, t0)
	if c := exp.Candidates; c[0].Cost != c[1].Cost {
		t.Fatalf("fixture: costs %v and %v should tie", c[0].Cost, c[1].Cost)
	}
	if d := p.Place(s, task, t0); key(d) != foreign.Key() || d != exp.Decision {
		t.Fatalf("Place chose %s, Explain %s; want %s", key(d), key(exp.Decision), foreign.Key())
	}
}

func TestExplainScoreParts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CrossRegionPenalty = 0.01
	price := 0.214 / 4 * 0.5
	// Below the hard watermark a pool scores at its price, whatever its fill; at or past it only
	// a critical task is placed there, at PenaltyMax.
	for _, tc := range []struct {
		ready    int
		critical bool
		penalty  float64
	}{{700, false, 1}, {960, true, cfg.PenaltyMax}} {
		est := mustEstimator(t, cfg)
		pool := with(cpuPool(t, "aws", "eu-west-1", "m6i.xlarge"), func(p *Pool) {
			p.Discount = 0.5
			p.Slots, p.Running, p.Ready, p.QueueCapacity = 10, 10, tc.ready, 1000
		})
		est.Observe("", "etl", pool.Key(), 90*time.Minute)
		p := mustPlacer(t, cfg, est)
		c := p.Explain(mustSnapshot(t, pool), Task{Type: "etl", Home: "us-east-1", Critical: tc.critical}, t0).Candidates[0]
		fill := float64(tc.ready) / 1000
		want := Candidate{
			Region: "eu-west-1", Pool: "m6i.xlarge", Price: price, Duration: 90 * time.Minute, DurationKnown: true,
			BaseCost: price * 1.5, Fill: fill, Penalty: tc.penalty, CrossRegion: 0.01, Cost: price*1.5*tc.penalty + 0.01, Won: true,
		}
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
		if c.Region != want.Region || c.Pool != want.Pool || c.Duration != want.Duration || !c.DurationKnown || !c.Won ||
			!near(c.Price, want.Price) || !near(c.BaseCost, want.BaseCost) || !near(c.Fill, want.Fill) ||
			!near(c.Penalty, want.Penalty) || !near(c.CrossRegion, want.CrossRegion) || !near(c.Cost, want.Cost) {
			t.Fatalf("ready %d: candidate\n got %+v\nwant %+v", tc.ready, c, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	tests := []struct {
		key string
		f   func(*Config)
	}{
		{"stale_after", func(c *Config) { c.StaleAfter = 0 }},
		{"soft_watermark", func(c *Config) { c.SoftWatermark = 1 }},
		{"hard_watermark", func(c *Config) { c.HardWatermark = 0.5 }},
		{"hard_watermark", func(c *Config) { c.HardWatermark = 1.2 }},
		{"penalty_max", func(c *Config) { c.PenaltyMax = 0.5 }},
		{"cross_region_penalty", func(c *Config) { c.CrossRegionPenalty = -1 }},
		{"default_duration", func(c *Config) { c.DefaultDuration = 0 }},
		{"servers", func(c *Config) { c.Servers = 0 }},
		{"estimator_size", func(c *Config) { c.EstimatorSize = 0 }},
		{"ewma_alpha", func(c *Config) { c.EWMAAlpha = math.NaN() }},
	}
	for _, tt := range tests {
		cfg := DefaultConfig()
		tt.f(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%s: Validate() = %v, want an error naming it", tt.key, err)
		}
		if _, err := NewPlacer(cfg, nil); err == nil {
			t.Errorf("%s: NewPlacer accepted an invalid config", tt.key)
		}
	}
}

func TestNewSnapshotRejects(t *testing.T) {
	ok := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	tests := []struct {
		name  string
		pools []Pool
	}{
		{"duplicate", []Pool{ok, ok}},
		{"no name", []Pool{with(ok, func(p *Pool) { p.Name = "" })}},
		{"negative ready", []Pool{with(ok, func(p *Pool) { p.Ready = -1 })}},
		{"discount above 1", []Pool{with(ok, func(p *Pool) { p.Discount = 1.5 })}},
		{"NaN price", []Pool{with(ok, func(p *Pool) { p.PricePerSlotHour = math.NaN() })}},
		{"window past midnight", []Pool{with(ok, func(p *Pool) { p.Window = &CapacitySchedule{Windows: []Window{{Start: 60, End: 1440}}} })}},
		{"overlapping windows", []Pool{with(ok, func(p *Pool) {
			p.Window = &CapacitySchedule{Windows: []Window{{Start: 20 * 60, End: 8 * 60, Slots: 7}, {Start: 7 * 60, End: 9 * 60, Slots: 2}}}
		})}},
	}
	for _, tt := range tests {
		if _, err := NewSnapshot(DefaultConfig(), tt.pools); err == nil || !strings.Contains(err.Error(), ok.Key()) && tt.name != "no name" {
			t.Errorf("%s: NewSnapshot error %v, want one naming the pool", tt.name, err)
		}
	}
}

func TestSnapshotCopiesTags(t *testing.T) {
	pool := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	s := mustSnapshot(t, pool)
	pool.Tags["class"] = "gpu"
	if d := mustPlacer(t, DefaultConfig(), nil).Place(s, cpuTask(), t0); !d.OK {
		t.Fatalf("changing the caller's tags changed the snapshot: %v", d.Err())
	}
}

func ExamplePlacer_Place() {
	cfg := DefaultConfig()
	est, _ := NewEstimator(cfg)
	placer, _ := NewPlacer(cfg, est)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cpu := map[string]string{"class": "cpu"}
	// m6i.xlarge list prices ÷ 4 vCPUs (testdata/prices.csv).
	snap, _ := NewSnapshot(cfg, []Pool{
		{Region: "us-east-1", Name: "cpu", Tags: cpu, Slots: 4, QueueCapacity: 100, PricePerSlotHour: 0.048, UpdatedAt: now, RegionHealthy: true},
		{Region: "eu-west-1", Name: "cpu", Tags: cpu, Slots: 4, QueueCapacity: 100, PricePerSlotHour: 0.0535, UpdatedAt: now, RegionHealthy: true},
	})
	task := Task{Type: "etl", Tags: cpu}
	counts := map[string]int{}
	for range 200 {
		d := placer.Place(snap, task, now)
		if !d.OK {
			fmt.Println(d.Err())
			break
		}
		counts[d.Region]++
	}
	fmt.Println(counts)
	// Output:
	// placement: no candidate pool: every matching pool is saturated
	// map[eu-west-1:99 us-east-1:99]
}

func serves(types ...string) func(*Pool) {
	return func(p *Pool) { p.Types = append([]string{}, types...) }
}

// Placement skips pools whose live workers do not serve the task's type, however cheap; pools
// that do not publish their types (nil) serve any type.
func TestNoHandler(t *testing.T) {
	use1 := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")      // 0.0480, the cheapest
	usc1 := cpuPool(t, "gcp", "us-central1", "n2-standard-4") // 0.04856
	euw1 := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")      // 0.0535
	for _, c := range []struct {
		name  string
		pools []Pool
		typ   string
		want  string
	}{
		{"cheapest serves it", []Pool{with(use1, serves("etl")), usc1}, "etl", "us-east-1/m6i.xlarge"},
		{"cheapest does not", []Pool{with(use1, serves("report")), usc1, euw1}, "etl", "us-central1/n2-standard-4"},
		{"only the dearest does", []Pool{with(use1, serves("report")), with(usc1, serves()), with(euw1, serves("etl", "report"))}, "etl", "eu-west-1/m6i.xlarge"},
		{"a type no pool names goes to unrestricted pools", []Pool{with(use1, serves("report")), euw1}, "thumbnail", "eu-west-1/m6i.xlarge"},
		{"nobody restricts", []Pool{use1, euw1}, "etl", "us-east-1/m6i.xlarge"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustSnapshot(t, c.pools...)
			p := mustPlacer(t, DefaultConfig(), nil)
			task := Task{Type: c.typ}
			d := p.Place(s, task, t0)
			if key(d) != c.want {
				t.Fatalf("placed in %s, want %s", key(d), c.want)
			}
			for _, cand := range p.Explain(s, task, t0).Candidates {
				pool := c.pools[cand.Index]
				wantNo := pool.Types != nil && !slices.Contains(pool.Types, c.typ)
				if (cand.Reason == ReasonNoHandler) != wantNo {
					t.Errorf("%s (types %v): reason %q", pool.Key(), pool.Types, cand.Reason)
				}
			}
		})
	}
	// The snapshot keeps its own copy of the types.
	pools := []Pool{with(use1, serves("etl")), usc1}
	s := mustSnapshot(t, pools...)
	pools[0].Types[0] = "report"
	if d := mustPlacer(t, DefaultConfig(), nil).Place(s, Task{Type: "etl"}, t0); key(d) != "us-east-1/m6i.xlarge" {
		t.Fatalf("placed in %s after the caller changed its slice", key(d))
	}
}

// A decision that places nothing says NoHandler when no pool passing the filters may run the
// type: each one's live workers serve other types, or it has no live worker at all. A pool that
// serves it, or one with live slots that does not publish its types, is not NO_HANDLER.
func TestDecisionNoHandler(t *testing.T) {
	use1 := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	euw1 := cpuPool(t, "aws", "eu-west-1", "m6i.xlarge")
	noWorkers := func(p *Pool) { p.Slots = 0 }
	for _, c := range []struct {
		name  string
		pools []Pool
		typ   string
		want  bool
	}{
		{"every pool serves other types", []Pool{with(use1, serves("greet")), with(euw1, serves("report"))}, "gret", true},
		{"the others have no worker", []Pool{with(use1, serves("greet")), with(euw1, noWorkers)}, "gret", true},
		{"a pool with live slots and unknown types", []Pool{with(use1, serves("greet")), euw1}, "gret", false},
		{"a pool serves it, without a free slot", []Pool{with(with(use1, serves("gret")), noWorkers)}, "gret", false},
		{"no pool has a worker", []Pool{with(use1, noWorkers), with(euw1, noWorkers)}, "gret", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustSnapshot(t, c.pools...)
			p := mustPlacer(t, DefaultConfig(), nil)
			for _, d := range []Decision{p.Place(s, Task{Type: c.typ}, t0), p.Explain(s, Task{Type: c.typ}, t0).Decision} {
				if d.OK && c.want {
					t.Fatalf("placed in %s", key(d))
				}
				if d.NoHandler() != c.want {
					t.Errorf("NoHandler() = %v, want %v (decision %+v)", d.NoHandler(), c.want, d)
				}
			}
		})
	}
}

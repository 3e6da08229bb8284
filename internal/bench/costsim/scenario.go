package costsim

import (
	_ "embed"
	"encoding/csv"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/placement"
)

// prices.csv is a verbatim copy of shared/data/prices.csv (see placement/testdata/README.md for
// its sources): hourly on-demand and spot VM prices. A CPU slot is one vCPU (VM price ÷ vCPUs), a
// GPU slot one single-GPU VM.
//
//go:embed prices.csv
var pricesCSV string

// Scenario is one simulated day.
type Scenario struct {
	Name string
	// Start is the day's first instant (UTC midnight); Length how long arrivals come (a day).
	// The run continues past it until every task finished, at most Drain longer.
	Start  time.Time
	Length time.Duration
	Drain  time.Duration
	Pools  []PoolSpec
	Types  []TypeSpec
	// Failures take a region down: no figures, no claims, running tasks lost (their work so far
	// billed, the tasks queued again at the head) until it is back.
	Failures []Failure
	// Prices multiply pools' list prices over spans of the day (spot swings).
	Prices []PriceSwing
	// ServersPerRegion: each has its own Placer; submissions of a region are spread over them.
	ServersPerRegion int
	// MaxWait is the wait target placement and hindsight use (placement.max_wait).
	MaxWait time.Duration
	// StaleWindow is how long a failed region's last figures stay in the view: its registration
	// is bound to its leader's lease, which expires this long after it stops renewing it.
	StaleWindow time.Duration
	// HandOff is how long a hand-off to another region takes to land.
	HandOff time.Duration
	// RefuseAfter is how long the outbox tries a region that does not answer before it places
	// the task again (three failed connects with backoff); the first failed connect marks the
	// region a suspect after Dial.
	RefuseAfter, Dial time.Duration
}

// PoolSpec is one pool of the simulated fleet.
type PoolSpec struct {
	Region, Name string
	Tags         map[string]string
	Slots        int
	// Window is the pool's capacity schedule (nil: always Slots).
	Window *placement.CapacitySchedule
	// Price per slot-hour before Discount; Spot marks a spot price.
	Price    float64
	Spot     bool
	Discount float64
	// Speed multiplies every task's base duration here (4: four times slower); SpeedOf
	// overrides it per task type.
	Speed   float64
	SpeedOf map[string]float64
	// QueueCapacity is the ready queue's capacity (queue fill = ready ÷ it).
	QueueCapacity int
	// MaxWait is the pool's wait target (pools[].max_wait; 0: the scenario's).
	MaxWait time.Duration
}

// TypeSpec is one kind of work: its arrivals over the day and how long it runs.
type TypeSpec struct {
	Name string
	Tags map[string]string
	// Mean is the median base duration (before a pool's speed); Sigma the spread of its
	// log-normal noise.
	Mean  time.Duration
	Sigma float64
	// Rate is the arrival rate (tasks per second) at a time of day; Peak bounds it.
	Rate func(tod time.Duration) float64
	Peak float64
}

// Failure takes Region down over [From, To) (times of day).
type Failure struct {
	Region   string
	From, To time.Duration
}

// PriceSwing multiplies Pool's ("region/name") price by Factor over [From, To).
type PriceSwing struct {
	Pool     string
	From, To time.Duration
	Factor   float64
}

// price reads one VM's list or spot price per hour from the embedded catalog.
func price(provider, region, instance string, spot bool) (perHour, vcpus float64, err error) {
	recs, err := csv.NewReader(strings.NewReader(pricesCSV)).ReadAll()
	if err != nil {
		return 0, 0, err
	}
	for _, r := range recs[1:] {
		if r[0] == provider && r[1] == region && r[3] == instance {
			col := 8
			if spot {
				col = 9
			}
			p, err := strconv.ParseFloat(r[col], 64)
			if err != nil {
				return 0, 0, fmt.Errorf("costsim: price of %s %s %q: %w", provider, region, instance, err)
			}
			v, _ := strconv.ParseFloat(r[4], 64) // empty for a bare accelerator's row
			return p, v, nil
		}
	}
	return 0, 0, fmt.Errorf("costsim: no price for %s %s %s", provider, region, instance)
}

// slotPrice is a CPU slot's price (VM ÷ vCPUs) or, with gpu, the whole single-GPU VM's.
func slotPrice(provider, region, instance string, spot, gpu bool) (float64, error) {
	p, v, err := price(provider, region, instance, spot)
	if err != nil || gpu {
		return p, err
	}
	return p / v, nil
}

func hours(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }

// bell is a normal curve's shape around mu (hours) with spread sd (hours), 1 at its peak.
func bell(tod time.Duration, mu, sd float64) float64 {
	x := tod.Hours() - mu
	return math.Exp(-x * x / (2 * sd * sd))
}

// Day is the default scenario: the design's cases on three regions of three clouds.
//
//   - CPU pools per region, one vCPU a slot: on-demand in each; a spot pool in us-east-1 that is
//     cheap per hour but four times slower per task (the trap), spot pools in
//     us-central1 and eastus whose prices swing (eastus ×6 09:00–12:00, ×3 during the ETL peak).
//   - Nightly ETL: 2.5 tasks/s of 2-minute tasks 01:00–01:30, then 1.2/s until 03:00 — more than
//     the fast pools run at once, so queues build and the wait target matters.
//   - Daytime reports around 14:00 and a steady thumbnail stream.
//   - GPU: an A100 inference pool in eastus that lends 7 of its 8 GPUs to batch work 20:00–08:00
//     (priced at its internal rate, 80 % off on-demand), where training takes 2 minutes; an
//     on-demand A100 pool in us-central1 where the same training takes 10.
//   - eastus, home of the cheapest CPU pool, fails 15:00–16:00.
func Day() (*Scenario, error) {
	type row struct {
		region, name, provider, instance string
		spot, gpu                        bool
		slots                            int
		speed                            float64
	}
	rows := []row{
		{"us-east-1", "cpu", "aws", "m6i.xlarge", false, false, 96, 1},
		{"us-east-1", "cpu-spot", "aws", "m6i.xlarge", true, false, 96, 4},
		{"us-central1", "cpu", "gcp", "n2-standard-4", false, false, 64, 1},
		{"us-central1", "cpu-spot", "gcp", "n2-standard-4", true, false, 32, 1},
		{"eastus", "cpu", "azure", "Standard_D4s_v5", false, false, 64, 1},
		{"eastus", "cpu-spot", "azure", "Standard_D4s_v5", true, false, 32, 1},
	}
	s := &Scenario{
		Name:  "day",
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Length: 24 * time.Hour, Drain: 6 * time.Hour,
		ServersPerRegion: 2, MaxWait: 30 * time.Second,
		StaleWindow: 5 * time.Second, HandOff: 50 * time.Millisecond,
		RefuseAfter: 1500 * time.Millisecond, Dial: 500 * time.Millisecond,
	}
	cpu := map[string]string{"class": "cpu"}
	gpu := map[string]string{"gpu": "a100"}
	for _, r := range rows {
		p, err := slotPrice(r.provider, r.region, r.instance, r.spot, r.gpu)
		if err != nil {
			return nil, err
		}
		s.Pools = append(s.Pools, PoolSpec{Region: r.region, Name: r.name, Tags: cpu, Slots: r.slots, Price: p,
			Spot: r.spot, Speed: r.speed, QueueCapacity: 10_000})
	}
	infer, err := slotPrice("azure", "eastus", "Standard_NC24ads_A100_v4", false, true)
	if err != nil {
		return nil, err
	}
	a100, _, err := price("gcp", "us-central1", "", false)
	if err != nil {
		return nil, err
	}
	// Batch training tolerates minutes of queueing, not 20× the price: the GPU pools' operators
	// set max_wait 10m; every other pool takes the scenario's 30 s.
	const gpuWait = 10 * time.Minute
	s.Pools = append(s.Pools,
		PoolSpec{Region: "eastus", Name: "gpu-infer", Tags: gpu, Slots: 8, Price: infer, Discount: 0.8, Speed: 1,
			QueueCapacity: 1000, MaxWait: gpuWait, Window: &placement.CapacitySchedule{Windows: []placement.Window{
				{Start: 20 * 60, End: 8 * 60, Slots: 7}, {Start: 8 * 60, End: 20 * 60, Slots: 0}}}},
		PoolSpec{Region: "us-central1", Name: "gpu", Tags: gpu, Slots: 8, Price: a100, Speed: 5, QueueCapacity: 1000, MaxWait: gpuWait},
	)
	s.Types = []TypeSpec{
		{Name: "etl.nightly", Tags: cpu, Mean: 2 * time.Minute, Sigma: 0.4, Peak: 2.5, Rate: func(t time.Duration) float64 {
			switch {
			case t >= hours(1) && t < hours(1.5):
				return 2.5
			case t >= hours(1.5) && t < hours(3):
				return 1.2
			}
			return 0
		}},
		{Name: "report.render", Tags: cpu, Mean: 20 * time.Second, Sigma: 0.5, Peak: 1.0, Rate: func(t time.Duration) float64 {
			return 0.2 + 0.8*bell(t, 14, 3)
		}},
		{Name: "thumbnail", Tags: cpu, Mean: 5 * time.Second, Sigma: 0.3, Peak: 0.5, Rate: func(time.Duration) float64 { return 0.5 }},
		{Name: "train.gpu", Tags: gpu, Mean: 2 * time.Minute, Sigma: 0.2, Peak: 0.05, Rate: func(t time.Duration) float64 {
			if t >= hours(20) || t < hours(6) {
				return 0.05
			}
			return 0.003
		}},
	}
	s.Failures = []Failure{{Region: "eastus", From: hours(15), To: hours(16)}}
	s.Prices = []PriceSwing{
		{Pool: "eastus/cpu-spot", From: hours(9), To: hours(12), Factor: 6},
		{Pool: "eastus/cpu-spot", From: hours(1.25), To: hours(2.5), Factor: 3},
	}
	return s, nil
}

package region

import (
	"slices"
	"time"
)

// Figures is what a region leader publishes to the global etcd under
// /ax/regions/<region>, bound to its lease: the region's API address, who
// leads, and each pool's live figures. Federation reads it back.
type Figures struct {
	Region string `json:"region"`
	// Provider says where the region runs (aws, gcp, azure, other: the
	// region file's provider), for operators' listings.
	Provider  string        `json:"provider,omitempty"`
	API       string        `json:"api"`
	Leader    string        `json:"leader"`
	Token     int64         `json:"token"`
	UpdatedAt time.Time     `json:"updated_at"`
	Pools     []PoolFigures `json:"pools"`
}

// PoolFigures are one pool's live numbers.
type PoolFigures struct {
	Name    string            `json:"name"`
	Tags    map[string]string `json:"tags,omitempty"`
	Slots   int               `json:"slots"`   // live slots (sum over live workers)
	Workers int               `json:"workers"` // live workers
	Running int               `json:"running"`
	// RunningSlots is the slot units the RUNNING tasks hold (a task of
	// slots 0.25 a quarter, any other one); 0 from leaders that did not
	// publish it: Running stands in (Busy).
	RunningSlots float64 `json:"running_slots,omitempty"`
	Ready        int     `json:"ready"`
	// Parked: READY tasks set aside by a limit or a full slow lane
	// (counted in Ready).
	Parked           int       `json:"parked,omitempty"`
	QueueCapacity    int       `json:"queue_capacity"`
	PricePerSlotHour float64   `json:"price_per_slot_hour"`
	Spot             bool      `json:"spot,omitempty"`
	Discount         float64   `json:"discount,omitempty"`
	ScaleFromZero    bool      `json:"scale_from_zero,omitempty"`
	Schedule         *Schedule `json:"capacity_schedule,omitempty"`
	// Paused: backpressure holds priorities 3–4 until the fill falls under
	// the resume threshold.
	Paused bool `json:"paused,omitempty"`
	// RunTimes are the pool's learnt run times per tenant and task type,
	// at most Config.RunTimeTypes, taken from the tenants in turn (each
	// tenant's most observed first), so that no tenant's volume keeps
	// another's out. Placement reads a tenant's own only. (Leaders before
	// run times were learnt per tenant published "run_times", merged over
	// tenants: they are not read.)
	RunTimes []RunTime `json:"tenant_run_times,omitempty"`
	// Types the live workers serve (queue.PoolWorkers.Types); null: any
	// type, as far as the leader knows (and what older leaders publish).
	Types []string `json:"types"`
	// DrainRate is how many tasks per second the pool finishes while its
	// slots are busy (completions and handler failures, from the learnt
	// run times' counts, over 30 s – 10 min ÷ the mean utilisation;
	// placement.DrainMeter): placement's measure of how fast its queue
	// moves. 0: not measured yet.
	DrainRate float64 `json:"drain_per_second"`
	// MaxWaitSeconds is the pool's target for a task's expected wait
	// (config pools[].max_wait); 0: none.
	MaxWaitSeconds float64 `json:"max_wait_seconds,omitempty"`
	// Tenants, when set, make the pool these tenants' own (config
	// pools[].tenants): placement puts no other tenant's task there.
	Tenants []string `json:"tenants,omitempty"`
	// Starving is how many of its READY tasks have waited longer than the
	// region's starvation_threshold (every priority; ax_tasks_starving).
	Starving int `json:"starving,omitempty"`
	// WaitP99Seconds is the 99th percentile of the region's ready→start
	// waits in the pool over the last minute, from a sample of its claims
	// (waitWindow); nil: too few claims to say.
	WaitP99Seconds *float64 `json:"wait_p99_seconds,omitempty"`
}

// RunTime is how long one tenant's task type runs in a pool, learnt from
// its completions (queue.RunTime): placement's expected duration for that
// tenant's tasks.
type RunTime struct {
	Type   string `json:"type"`
	Tenant string `json:"tenant"`
	Count  int64  `json:"count"`
	// Seconds is the exponentially weighted mean run time; Spread its
	// standard deviation, both in seconds.
	Seconds float64 `json:"seconds"`
	Spread  float64 `json:"spread"`
}

// Schedule is a pool's capacity windows: inside a window the pool has the
// window's slots for this work; outside every window it has none.
type Schedule struct {
	Timezone string           `json:"timezone"`
	Windows  []ScheduleWindow `json:"windows"`
}

// ScheduleWindow is "HH:MM"–"HH:MM" local time with a slot count.
type ScheduleWindow struct {
	Start string `json:"start"`
	End   string `json:"end"`
	Slots int    `json:"slots"`
}

// Busy is the slot units the pool's RUNNING tasks hold: RunningSlots, or
// Running when the leader did not publish it.
func (p PoolFigures) Busy() float64 {
	if p.RunningSlots > 0 || p.Running == 0 {
		return p.RunningSlots
	}
	return float64(p.Running)
}

// Utilisation is the slot units busy ÷ live slots (0 without slots): four
// tasks of slots 0.25 fill one slot.
func (p PoolFigures) Utilisation() float64 {
	if p.Slots <= 0 {
		return 0
	}
	return p.Busy() / float64(p.Slots)
}

// QueueFill is ready ÷ queue capacity.
func (p PoolFigures) QueueFill() float64 {
	if p.QueueCapacity <= 0 {
		return 0
	}
	return float64(p.Ready) / float64(p.QueueCapacity)
}

// moved reports whether any figure moved by more than 5 % (or a count
// changed from or to zero, or the served types changed), which triggers an
// early publish.
func moved(a, b []PoolFigures) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].PricePerSlotHour != b[i].PricePerSlotHour ||
			(a[i].Types == nil) != (b[i].Types == nil) || !slices.Equal(a[i].Types, b[i].Types) {
			return true
		}
		for _, pair := range [][2]int{{a[i].Slots, b[i].Slots}, {a[i].Running, b[i].Running}, {a[i].Ready, b[i].Ready}} {
			x, y := float64(pair[0]), float64(pair[1])
			if (x == 0) != (y == 0) {
				return true
			}
			if d := x - y; d > 0.05*max(x, y) || -d > 0.05*max(x, y) {
				return true
			}
		}
	}
	return false
}

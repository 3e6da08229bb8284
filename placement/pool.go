package placement

import (
	"slices"
	"time"
)

// Pool is one pool's published figures, as the etcd view holds them.
type Pool struct {
	Region string
	Name   string
	// Tags a task can require (gpu=a100, arch=arm64, ...).
	Tags map[string]string
	// Slots is the pool's live slots outside its capacity windows (the base capacity).
	Slots int
	// Running and Ready are the tasks running and queued in the pool.
	Running int
	Ready   int
	// RunningSlots is the slot units the running tasks hold (a task of
	// slots 0.25 a quarter); 0 with Running > 0: Running (whole tasks).
	RunningSlots float64
	// QueueCapacity is the ready queue's capacity: queue fill = Ready ÷ QueueCapacity.
	QueueCapacity int
	// PricePerSlotHour is the list price in USD of one slot for one hour.
	PricePerSlotHour float64
	// Spot marks a spot price. It does not change the score (PricePerSlotHour already is the
	// price paid); it is carried so callers can show and count it.
	Spot bool
	// Discount in [0, 1] is taken off the price: effective = price × (1 − discount).
	Discount float64
	// Window optionally replaces Slots at some times of day.
	Window *CapacitySchedule
	// UpdatedAt is when these figures were published. A newer value also ends the damping of
	// the placements this server counted into the pool (see Placer).
	UpdatedAt time.Time
	// PrevUpdatedAt is when the figures before these were published (zero: not known). The
	// gap between the two says whether the pool was stale before these figures, however long
	// ago this server last placed into it (see Placer).
	PrevUpdatedAt time.Time
	// RegionHealthy is false when the region is not registered or its leader is gone.
	RegionHealthy bool
	// Local marks a pool of the placing server's own region. Its figures are local truth
	// there and never count as stale (STALE_STATUS): a region cut off from whatever
	// publishes its figures to the others keeps placing its own work. Its store's admission
	// stays authoritative.
	Local bool
	// ScaleFromZero admits tasks to a pool with no live slots (workers start on demand).
	ScaleFromZero bool
	// Paused: backpressure holds the pool's low priorities (3–4) until its fill falls under the
	// resume threshold; such tasks (unless critical) are not admitted, as if it were saturated.
	Paused bool
	// Types lists the task types the pool's live workers serve; a task of another type is
	// rejected with NO_HANDLER. Nil means any type: the leader does not know (workers that do
	// not publish their types, a catch-all handler, more types than it publishes, an older
	// leader), and the pool is placed as before types were published.
	Types []string
	// DrainRate is how many tasks per second the pool finished lately (the region leader's
	// measure of completions, placement.DrainMeter); 0 when not measured. With the learnt
	// durations it gives a new task's expected wait: the tasks ahead of it ÷ this rate.
	DrainRate float64
	// MaxWait is the operator's target for a task's expected wait in this pool (config
	// pools[].max_wait), in place of Config.MaxWait; 0: Config.MaxWait. See it for the rule.
	MaxWait time.Duration
	// Tenants, when set, makes the pool these tenants' own: a task of another tenant is rejected
	// with TENANT_POOL. Nil: any tenant.
	Tenants []string
}

// busy is the slot units p's running tasks hold.
func (p *Pool) busy() float64 {
	if p.RunningSlots > 0 || p.Running == 0 {
		return p.RunningSlots
	}
	return float64(p.Running)
}

// Admits reports whether p takes tasks of tenant: p is no tenant's own, or tenant's.
func (p *Pool) Admits(tenant string) bool {
	return len(p.Tenants) == 0 || slices.Contains(p.Tenants, tenant)
}

// Key identifies a pool across snapshots and in an Estimator: "region/name".
func (p Pool) Key() string { return p.Region + "/" + p.Name }

// Task is what placement needs to know of a task.
type Task struct {
	// Type keys the duration estimates.
	Type string
	// Tags the pool must carry, each with the same value.
	Tags map[string]string
	// Regions allowed; empty means any.
	Regions []string
	// Critical tasks are admitted to saturated pools (at the maximum penalty).
	Critical bool
	// Priority 0 (highest) to 4; priorities 3–4 are not admitted to a Paused pool.
	Priority int
	// Home is the task's home region; pools elsewhere cost Config.CrossRegionPenalty more.
	// Empty means no home, no penalty.
	Home string
	// MaxWait is the task's own target for its expected wait (its deadline to start); 0: none.
	// The smaller of it and the pool's target applies.
	MaxWait time.Duration
	// Tenant owns the task: pools that are other tenants' own (Pool.Tenants) are rejected.
	Tenant string
}

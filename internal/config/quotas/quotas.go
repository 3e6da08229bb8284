package quotas

import (
	"cmp"
	"math"

	"github.com/ax-sched/ax/internal/config/keypath"
	"github.com/ax-sched/ax/schedule"
)

// Quotas bound what each tenant may ask of one server, so that one tenant
// cannot take the capacity of the others: submits beyond a tenant's rate
// get 429 before any work is done for them.
type Quotas struct {
	// Default applies to every tenant without an entry in Tenants.
	Default TenantQuota `mapstructure:"default" yaml:"default"`
	// Tenants replace Default for the tenants they name.
	Tenants map[string]TenantQuota `mapstructure:"tenants" yaml:"tenants"`
	Batch   BatchLimits            `mapstructure:"batch" yaml:"batch"`
	// MemoryReserve is the share of the region's Redis maxmemory kept for
	// work already accepted (docs/security.md "Memory reserve"): once a
	// shard's used memory passes maxmemory × (1 − MemoryReserve), the
	// tenant holding the most payload bytes is refused new tasks (429);
	// past maxmemory × (1 − MemoryReserve/4), every tenant's (503). 0: off.
	MemoryReserve float64 `mapstructure:"memory_reserve" yaml:"memory_reserve"`
}

// MemoryReserveDefault is memory_reserve's default: a tenth of maxmemory
// is room for what accepted tasks still write (leases, results, trails)
// while new submits are refused.
const MemoryReserveDefault = 0.1

// MemoryReserveMax is the largest memory_reserve: a reserve above half of
// maxmemory would refuse submits on a Redis that is mostly free.
const MemoryReserveMax = 0.5

// TenantQuota is one tenant's submit rate: a token bucket refilled at
// SubmitsPerSecond tasks a second holding at most Burst (a batch takes one
// per task). SubmitsPerSecond 0 is no limit.
type TenantQuota struct {
	SubmitsPerSecond float64 `mapstructure:"submits_per_second" yaml:"submits_per_second"`
	Burst            int     `mapstructure:"burst" yaml:"burst"`
	// MaxBacklog is the most unfinished tasks (PENDING, READY, RUNNING) the
	// tenant's submits, DAG runs and hand-offs received may leave in this
	// region; 0: no limit.
	MaxBacklog int `mapstructure:"max_backlog" yaml:"max_backlog"`
	// MaxBacklogBytes is the most payload bytes those unfinished tasks may
	// hold in this region, checked with MaxBacklog; 0: no limit.
	MaxBacklogBytes int64 `mapstructure:"max_backlog_bytes" yaml:"max_backlog_bytes"`
	// MaxSchedules is the most schedules the tenant may have in the
	// federation; 0: quotas.default's, whose 0 is
	// schedule.MaxSchedulesDefault.
	MaxSchedules int `mapstructure:"max_schedules" yaml:"max_schedules"`
	// ScheduleFiresPerSecond is how many slots of the tenant's schedules
	// the federation leader fires a second; 0: quotas.default's, whose 0
	// is schedule.FiresPerSecondDefault.
	ScheduleFiresPerSecond float64 `mapstructure:"schedule_fires_per_second" yaml:"schedule_fires_per_second"`
	// MaxBackfillPeriods is the most periods one backfill of the tenant's
	// schedules may run; 0: quotas.default's, whose 0 is
	// schedule.MaxBackfillPeriodsDefault.
	MaxBackfillPeriods int `mapstructure:"max_backfill_periods" yaml:"max_backfill_periods"`
}

// Quota returns tenant's quota.
func (q Quotas) Quota(tenant string) TenantQuota {
	if t, ok := q.Tenants[tenant]; ok {
		return t
	}
	return q.Default
}

// Schedules returns the limits of tenant's schedules, each unset value
// taken from quotas.default, then from the schedule package's defaults.
func (q Quotas) Schedules(tenant string) schedule.Limits {
	t := q.Quota(tenant)
	return schedule.Limits{MaxSchedules: cmp.Or(t.MaxSchedules, q.Default.MaxSchedules, schedule.MaxSchedulesDefault),
		FiresPerSecond:     cmp.Or(t.ScheduleFiresPerSecond, q.Default.ScheduleFiresPerSecond, schedule.FiresPerSecondDefault),
		MaxBackfillPeriods: cmp.Or(t.MaxBackfillPeriods, q.Default.MaxBackfillPeriods, schedule.MaxBackfillPeriodsDefault)}
}

// BatchLimits cap one POST /v1/tasks/batch.
type BatchLimits struct {
	// MaxItems is the most tasks in one batch (at most 1000).
	MaxItems int `mapstructure:"max_items" yaml:"max_items"`
	// MaxBytes is the largest batch body.
	MaxBytes int64 `mapstructure:"max_bytes" yaml:"max_bytes"`
}

// Validate reports each problem of q through add, by its key path under
// "quotas"; maxPayload is task.max_payload (a batch must hold one task of
// it) and maxItems the most a batch may ever hold.
func (q Quotas) Validate(add func(key, format string, args ...any), maxPayload int64, maxItems int) {
	check := func(key string, t TenantQuota) {
		if !(t.SubmitsPerSecond >= 0) || math.IsInf(t.SubmitsPerSecond, 0) {
			add(keypath.Join(key, "submits_per_second"), "must be ≥ 0 (0: no limit), got %v", t.SubmitsPerSecond)
		}
		if t.MaxBacklog < 0 {
			add(keypath.Join(key, "max_backlog"), "must be ≥ 0 (0: no limit), got %d", t.MaxBacklog)
		}
		if t.MaxBacklogBytes < 0 || (t.MaxBacklogBytes > 0 && t.MaxBacklogBytes < maxPayload) {
			add(keypath.Join(key, "max_backlog_bytes"), "must be 0 (no limit) or ≥ task.max_payload (%d), got %d", maxPayload, t.MaxBacklogBytes)
		}
		if t.MaxSchedules < 0 {
			add(keypath.Join(key, "max_schedules"), "must be ≥ 0 (0: the default), got %d", t.MaxSchedules)
		}
		if !(t.ScheduleFiresPerSecond >= 0) || math.IsInf(t.ScheduleFiresPerSecond, 0) {
			add(keypath.Join(key, "schedule_fires_per_second"), "must be ≥ 0 (0: the default), got %v", t.ScheduleFiresPerSecond)
		}
		if t.MaxBackfillPeriods < 0 {
			add(keypath.Join(key, "max_backfill_periods"), "must be ≥ 0 (0: the default), got %d", t.MaxBackfillPeriods)
		}
		if t.SubmitsPerSecond > 0 && t.Burst < 1 {
			add(keypath.Join(key, "burst"), "must be ≥ 1 with submits_per_second, got %d", t.Burst)
		}
	}
	check("quotas.default", q.Default)
	for _, name := range keypath.Sorted(q.Tenants) {
		check(keypath.Entry("quotas.tenants", name), q.Tenants[name])
	}
	if !(q.MemoryReserve >= 0 && q.MemoryReserve <= MemoryReserveMax) {
		add("quotas.memory_reserve", "must be between 0 (off) and %v, got %v", MemoryReserveMax, q.MemoryReserve)
	}
	if q.Batch.MaxItems < 1 || q.Batch.MaxItems > maxItems {
		add("quotas.batch.max_items", "must be between 1 and %d, got %d", maxItems, q.Batch.MaxItems)
	}
	// One task of the largest payload must fit in a batch.
	if min := maxPayload + 64<<10; maxPayload > 0 && q.Batch.MaxBytes < min {
		add("quotas.batch.max_bytes", "must be ≥ task.max_payload + 64 KiB (%d), got %d", min, q.Batch.MaxBytes)
	}
}

// DefaultTenant is the quota of a tenant the configuration leaves out: the
// schedule caps are schedule's own defaults (the other limits: none).
func DefaultTenant() TenantQuota {
	return TenantQuota{MaxSchedules: schedule.MaxSchedulesDefault, ScheduleFiresPerSecond: schedule.FiresPerSecondDefault,
		MaxBackfillPeriods: schedule.MaxBackfillPeriodsDefault}
}

package server

import (
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
)

func etcdConfig(c config.EtcdCluster, prefix string, ttl time.Duration) lease.Config {
	return lease.Config{
		Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, Username: c.Username, Password: c.Password,
		TLS:        lease.TLSFiles{CAFile: c.TLS.CA, CertFile: c.TLS.Cert, KeyFile: c.TLS.Key},
		SessionTTL: ttl, Prefix: prefix,
	}
}

func storeOptions(cfg *config.Region) queue.Options {
	return queue.Options{
		Region: cfg.Name, Shards: cfg.Redis.Shards, Lease: cfg.Lease.Duration, AgingStep: cfg.AgingStep,
		RetainSuccess: cfg.Retention.Success, RetainCanceled: cfg.Retention.Canceled, RetainDead: cfg.Retention.Dead,
		Defaults:     defaultsOf(cfg),
		WaitReplicas: cfg.Redis.WaitReplicas, WaitTimeout: cfg.Redis.WaitTimeout,
		ColdHorizon: cfg.Task.ColdHorizon,
	}
}

func defaultsOf(cfg *config.Region) task.Defaults {
	return task.Defaults{
		Timeout: cfg.Task.DefaultTimeout, MaxRetries: cfg.Retry.MaxRetries, RetryBase: cfg.Retry.Base,
		RetryCap: cfg.Retry.Cap, IdempotencyTTL: 24 * time.Hour, MaxPayload: int(cfg.Task.MaxPayload),
		MaxPause: cfg.Retry.MaxPause,
	}
}

func placementConfig(cfg *config.Region) placement.Config {
	pc := placement.DefaultConfig()
	pc.StaleAfter = cfg.Placement.StaleAfter
	pc.CrossRegionPenalty = cfg.Placement.CrossRegionPenalty
	pc.DefaultDuration = cfg.Placement.DefaultDuration
	pc.MaxWait = cfg.Placement.MaxWait
	// Placement's hard watermark is the spill threshold: at ≥ spill a pool
	// is SATURATED for non-critical work, which goes elsewhere (or 429).
	// SoftWatermark no longer scores (placement.Config); kept valid (below spill).
	pc.SoftWatermark = cfg.Thresholds.Alert
	pc.HardWatermark = cfg.Thresholds.Spill
	return pc
}

// budgetsOf is the region file's tenants' monthly budgets.
func budgetsOf(cfg *config.Region) map[string]budget.Budget {
	var out map[string]budget.Budget
	for name, t := range cfg.Tenants {
		if out == nil {
			out = map[string]budget.Budget{}
		}
		out[name] = budget.Budget{MonthlyUSD: t.MonthlyBudgetUSD, Refuse: t.OverBudget == "refuse", PriceCap: t.PriceCap}
	}
	return out
}

func regionPools(cfg *config.Region) []region.Pool {
	var out []region.Pool
	for _, p := range cfg.Pools {
		rp := region.Pool{Name: p.Name, Tags: p.Tags, Slots: p.Slots, QueueCapacity: p.QueueCapacity, PricePerSlotHour: p.PricePerSlotHour,
			Spot: p.Spot, Discount: p.Discount, ScaleFromZero: p.ScaleFromZero, MaxWait: p.MaxWait,
			Tenants: p.Tenants}
		if p.Thresholds != nil {
			rp.Thresholds = thresholds(*p.Thresholds)
		}
		if len(p.CapacitySchedule.Windows) > 0 {
			s := &region.Schedule{Timezone: p.CapacitySchedule.Timezone}
			for _, w := range p.CapacitySchedule.Windows {
				s.Windows = append(s.Windows, region.ScheduleWindow{Start: w.Start, End: w.End, Slots: w.Slots})
			}
			rp.Schedule = s
		}
		out = append(out, rp)
	}
	return out
}

func thresholds(t config.Thresholds) region.Thresholds {
	return region.Thresholds{Alert: t.Alert, Spill: t.Spill, Pause: t.Pause, Resume: t.Resume}
}

func preemption(p config.Preemption) region.Preemption {
	return region.Preemption{
		Disabled: !p.Enabled, MinPriorityGap: p.MinPriorityGap, MaxRuntime: p.MaxRuntime, MaxPerTask: p.MaxPerTask,
		MaxPerWorkerPerMinute: p.MaxPerWorkerPerMinute, ReadmitRate: p.ReadmitRate,
	}
}

// apiTokens are the region file's API tokens as the API checks them.
// apiAuth is the API's authentication by cfg.Auth: its tokens, and the
// throttle of clients whose tokens fail.
func apiAuth(cfg *config.Region, log *slog.Logger) *httpapi.Auth {
	return &httpapi.Auth{Enabled: cfg.Auth.Enabled, ClusterToken: cfg.Auth.ClusterToken, Tokens: apiTokens(cfg),
		Failures: httpapi.NewFailureLimiter(cfg.Auth.FailuresPerMinute, log)}
}

func apiTokens(cfg *config.Region) []httpapi.Token {
	var ts []httpapi.Token
	for _, t := range cfg.Auth.Tokens {
		role, _ := httpapi.ParseRole(t.Role)
		ts = append(ts, httpapi.Token{Name: t.Name, SHA256: t.TokenSHA256, Role: role, Tenant: t.Tenant, Expires: t.Expires(),
			Tenants: t.Tenants, Pools: t.Pools, Types: t.Types})
	}
	return ts
}

// fairShareOf is cfg's fair shares by pool (docs/fairness.md).
func fairShareOf(cfg *config.Region) map[string]queue.FairShare {
	out := map[string]queue.FairShare{}
	for _, p := range cfg.Pools {
		if p.FairShare != nil {
			out[p.Name] = queueFairShare(*p.FairShare)
		}
	}
	return out
}

func queueFairShare(c config.FairShare) queue.FairShare {
	fs := queue.FairShare{DefaultWeight: c.DefaultWeight, Tenants: map[string]queue.TenantShare{}}
	for t, ts := range c.Tenants {
		fs.Tenants[t] = queue.TenantShare{Weight: ts.Weight, Floor: ts.Floor, Max: ts.Max}
	}
	return fs
}

// slowLanesOf is cfg's slow lanes by pool (docs/fairness.md).
func slowLanesOf(cfg *config.Region) map[string]region.SlowLane {
	out := map[string]region.SlowLane{}
	for _, p := range cfg.Pools {
		if p.SlowLane != nil {
			out[p.Name] = region.SlowLane{Threshold: p.SlowLane.Threshold, MaxShare: p.SlowLane.MaxShare}
		}
	}
	return out
}

// limitsOf is this region's share of cfg's limits (docs/limits.md).
func limitsOf(cfg *config.Region) []queue.Limit {
	var out []queue.Limit
	for _, l := range cfg.Limits {
		sh := l.Share(cfg.Name, cfg.Regions)
		out = append(out, queue.Limit{Kind: sh.Kind, Name: sh.Name, Rate: sh.Rate, Burst: sh.Burst, Concurrency: sh.Concurrency})
	}
	return out
}

// PoolNames lists cfg's pools, sorted, for messages.
func PoolNames(cfg *config.Region) string { return strings.Join(poolList(cfg), ", ") }

func poolList(cfg *config.Region) []string {
	var n []string
	for _, p := range cfg.Pools {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return n
}

package config

import (
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/internal/config/quotas"
	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	axregion "github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// DefaultMaxPayload is task.max_payload's default: enough for the ids,
// parameters and small documents a task carries (large data belongs in a
// store the task names), and small enough that one tenant's backlog of
// them does not fill the Redis every tenant shares.
const DefaultMaxPayload = 64 << 10

// Default returns the defaults of every key: the one place they are
// gathered, each taken from the package that applies it when that package
// names one (configs/example.yaml repeats them for readers; a test keeps
// the two equal). A few defaults depend on other keys and are filled in by Parse once
// the file is read:
//
//   - public_addr: http://<listen> (https:// with http_server.tls)
//   - regions: [<region>]
//   - etcd.global: all of etcd.regional, when etcd.global.endpoints is empty
//   - redis.addr: dropped when Sentinel or Cluster is configured and addr was
//     not set explicitly
//
// and each entry of pools starts from the pool defaults (queue_capacity
// 10000, timezone UTC), with per-pool thresholds filled from the region's.
func Default() *Region {
	td, pl := task.DefaultDefaults(), placement.DefaultConfig()
	return &Region{
		Provider: "other",
		Listen:   "127.0.0.1:8080",
		Etcd: Etcd{
			Regional: EtcdCluster{
				Endpoints:   []string{"http://127.0.0.1:2379"},
				DialTimeout: lease.DefaultDialTimeout,
			},
			Global:     EtcdCluster{DialTimeout: lease.DefaultDialTimeout},
			Prefix:     lease.DefaultPrefix,
			SessionTTL: lease.DefaultSessionTTL,
		},
		Redis: Redis{
			Addr:        "127.0.0.1:6379",
			Shards:      queue.ShardsDefault,
			WaitTimeout: queue.WaitTimeoutDefault,
		},
		Thresholds: Thresholds(axregion.DefaultThresholds()),
		Retry:      Retry{MaxRetries: td.MaxRetries, Base: td.RetryBase, Cap: td.RetryCap, MaxPause: td.MaxPause},
		Lease:      Lease{Duration: queue.LeaseDefault, Heartbeat: worker.DefaultHeartbeat},
		Task:       Task{DefaultTimeout: td.Timeout, MaxPayload: DefaultMaxPayload, ColdHorizon: 5 * time.Minute},
		AgingStep:  queue.AgingStepDefault,
		Retention: Retention{
			Success:  queue.RetainSuccessDefault,
			Canceled: queue.RetainCanceledDefault,
			Dead:     queue.RetainDeadDefault,
		},
		StarvationThreshold: axregion.StarvationThresholdDefault,
		BudgetRefresh:       federation.BudgetRefreshDefault,
		Tracing:             Tracing{SampleRatio: 1},
		HTTPServer: HTTPServer{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10, MaxConnections: 4096,
			MaxConnectionsPerClient: 256, FirstRequestTimeout: 5 * time.Second,
			MaxLongPolls: 8, MaxLongPollsPerTenant: 2},
		Quotas: quotas.Quotas{Batch: quotas.BatchLimits{MaxItems: apiv1.MaxBatch, MaxBytes: apiv1.DefaultBatchMaxBytes},
			Default: quotas.DefaultTenant(), MemoryReserve: quotas.MemoryReserveDefault},
		Results: Results{MaxBytes: task.DefaultMaxResultBytes},
		RemoteWorkers: RemoteWorkers{MaxResultBytes: apiv1.DefaultMaxResultBytes, MaxWait: apiv1.DefaultWorkerMaxWait,
			MaxLongPolls: apiv1.DefaultWorkerLongPolls, MaxLongPollsPerToken: apiv1.DefaultWorkerLongPollsPerToken},
		Placement: Placement{
			StaleAfter:      pl.StaleAfter,
			UnhealthyGrace:  10 * time.Second,
			DefaultDuration: pl.DefaultDuration,
			HandOffHorizon:  federation.HandOffHorizonDefault,
		},
		Preemption: Preemption{
			Enabled:               true,
			MinPriorityGap:        axregion.MinPriorityGapDefault,
			MaxRuntime:            axregion.MaxRuntimeDefault,
			MaxPerTask:            axregion.MaxPerTaskDefault,
			ReadmitDelayMin:       worker.DefaultPreemptDelayMin,
			ReadmitDelayMax:       worker.DefaultPreemptDelayMax,
			ReadmitRate:           axregion.ReadmitRateDefault,
			MaxPerWorkerPerMinute: axregion.MaxPerWorkerPerMinuteDefault,
		},
		Auth: Auth{Enabled: true, FailuresPerMinute: 60},
		Worker: Worker{
			Concurrency:   16,
			ClaimBatch:    worker.DefaultClaimBatch,
			ShutdownGrace: worker.DefaultShutdownGrace,
			// A tenant's URL must not reach the worker's own network
			// (cloud metadata, Redis, etcd) unless the operator says so.
			HTTP: HTTP{DenyPrivate: true},
		},
	}
}

// defaultPool is what each entry of pools starts from.
func defaultPool() Pool {
	return Pool{
		QueueCapacity:    10000,
		CapacitySchedule: CapacitySchedule{Timezone: "UTC"},
	}
}

// fillDerived applies the defaults that depend on other keys (see Default).
// set reports whether a key was given in the file or the environment.
func (r *Region) fillDerived(set func(key string) bool) {
	if r.PublicAddr == "" {
		r.PublicAddr = "http://" + r.Listen
		if r.HTTPServer.TLS.On() {
			r.PublicAddr = "https://" + r.Listen
		}
	}
	if len(r.Regions) == 0 && dnsLabel.MatchString(r.Name) {
		r.Regions = []string{r.Name}
	}
	if len(r.Etcd.Global.Endpoints) == 0 {
		r.Etcd.Global = r.Etcd.Regional
		r.Etcd.Global.Endpoints = append([]string(nil), r.Etcd.Regional.Endpoints...)
	}
	if r.Redis.Mode() != "addr" && !set("redis.addr") {
		r.Redis.Addr = ""
	}
	if !set("results.max_bytes") && set("remote_workers.max_result_bytes") {
		r.Results.MaxBytes = r.RemoteWorkers.MaxResultBytes
	}
	r.RemoteWorkers.MaxResultBytes = r.Results.MaxBytes
}

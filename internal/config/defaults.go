package config

import "time"

// Default returns the defaults of every key: the one place they are written
// down (configs/example.yaml repeats them for readers; a test keeps the two
// equal). A few defaults depend on other keys and are filled in by Parse once
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
	return &Region{
		Provider: "other",
		Listen:   "127.0.0.1:8080",
		Etcd: Etcd{
			Regional: EtcdCluster{
				Endpoints:   []string{"http://127.0.0.1:2379"},
				DialTimeout: 5 * time.Second,
			},
			Global:     EtcdCluster{DialTimeout: 5 * time.Second},
			Prefix:     "/ax/",
			SessionTTL: 5 * time.Second,
		},
		Redis: Redis{
			Addr:        "127.0.0.1:6379",
			Shards:      1,
			WaitTimeout: 100 * time.Millisecond,
		},
		// The seeds' figures: alert at 60 % queue fill, spill at 80 %,
		// pause at 95 %, resume below 40 %.
		Thresholds: Thresholds{Alert: 0.60, Spill: 0.80, Pause: 0.95, Resume: 0.40},
		Retry:      Retry{MaxRetries: 4, Base: 300 * time.Millisecond, Cap: 30 * time.Second},
		Lease:      Lease{Duration: 10 * time.Second, Heartbeat: 3 * time.Second},
		Task:       Task{DefaultTimeout: 30 * time.Minute, MaxPayload: 1 << 20, ColdHorizon: 5 * time.Minute},
		AgingStep:  60 * time.Second,
		Retention: Retention{
			Success:  24 * time.Hour,
			Canceled: 24 * time.Hour,
			Dead:     7 * 24 * time.Hour,
		},
		StarvationThreshold: 10 * time.Minute,
		BudgetRefresh:       30 * time.Second,
		Tracing:             Tracing{SampleRatio: 1},
		HTTPServer: HTTPServer{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10, MaxConnections: 4096,
			MaxLongPolls: 8, MaxLongPollsPerTenant: 2},
		Quotas: Quotas{Batch: BatchLimits{MaxItems: 1000, MaxBytes: 16 << 20}},
		Placement: Placement{
			StaleAfter:      15 * time.Second,
			UnhealthyGrace:  10 * time.Second,
			DefaultDuration: time.Second,
			HandOffHorizon:  30 * time.Second,
		},
		Preemption: Preemption{
			Enabled:               true,
			MinPriorityGap:        2,
			MaxRuntime:            30 * time.Minute,
			MaxPerTask:            2,
			ReadmitDelayMin:       60 * time.Second,
			ReadmitDelayMax:       120 * time.Second,
			ReadmitRate:           10,
			MaxPerWorkerPerMinute: 2,
		},
		Auth: Auth{Enabled: true},
		Worker: Worker{
			Concurrency:   16,
			ClaimBatch:    32,
			ShutdownGrace: 30 * time.Second,
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
}

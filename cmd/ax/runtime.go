package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/internal/buildinfo"
	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/tlsconf"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/schedule"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
)

// newLogger writes to stderr: text on a terminal, JSON otherwise (what log
// collectors read); AX_LOG_FORMAT=text or json chooses. Durations are
// written as Go durations ("1.5s"), not nanoseconds.
func newLogger(level slog.Level) *slog.Logger {
	l := logTo(os.Stderr, logText(os.Getenv("AX_LOG_FORMAT"), os.Stderr), level)
	useRedisLog(l)
	return l
}

// useRedisLog sends the Redis client's messages (process-wide) to l.
func useRedisLog(l *slog.Logger) { redis.SetLogger(redisLogger{l.With("component", "redis")}) }

// redisLogger puts the Redis client's own messages (a pool that cannot
// dial, a failover) in ax's log, as JSON like the rest: they were plain
// "redis: <date> pool.go:770: ..." lines on stderr, which a log collector
// reading JSON drops or mangles.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}

func logTo(w io.Writer, text bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String())
		}
		return a
	}}
	if text {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// logText: the format asked for, else text when f is a terminal.
func logText(format string, f *os.File) bool {
	switch format {
	case "text":
		return true
	case "json":
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func etcdConfig(c config.EtcdCluster, prefix string, ttl time.Duration) lease.Config {
	return lease.Config{
		Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, Username: c.Username, Password: c.Password,
		TLS:        lease.TLSFiles{CAFile: c.TLS.CA, CertFile: c.TLS.Cert, KeyFile: c.TLS.Key},
		SessionTTL: ttl, Prefix: prefix,
	}
}

// redisClient is the one place ax's processes build a Redis client: single,
// Sentinel (its own credentials) or Cluster, over TLS when redis.tls or a
// rediss:// addr says so (sentinels and every node too).
// poolSize > 0 sets its connection pool's size (per node).
//
// A call's context deadline bounds it (ContextTimeoutEnabled): a wait for
// a pooled connection and the retries end at the deadline, and so does an
// attempt's read when the deadline comes before the read timeout (5 s).
// Without it a frozen Redis held each call its read timeouts and retries
// whatever its caller's deadline (the probe's 1 s ping, /readyz's 2 s, a
// worker's 5 s). Blocking calls keep working: go-redis reads a BLPOP or
// XREAD BLOCK of b until b + 10 s, or the context's deadline if earlier,
// and ax gives them either no deadline (long-polls, the worker's wait for
// work) or one past their block (the waker's BLPOP: its block + 5 s).
func redisClient(c config.Redis, poolSize int) (redis.UniversalClient, error) {
	o := &redis.UniversalOptions{Username: c.Username, Password: c.Password, DB: c.DB, PoolSize: poolSize,
		ContextTimeoutEnabled: true}
	switch {
	case c.Sentinel.MasterName != "":
		o.MasterName, o.Addrs = c.Sentinel.MasterName, c.Sentinel.Addrs
		o.SentinelUsername, o.SentinelPassword = c.Sentinel.Username, c.Sentinel.Password
	case len(c.Cluster.Addrs) > 0:
		o.Addrs, o.IsClusterMode = c.Cluster.Addrs, true
	default:
		o.Addrs = []string{c.HostPort()}
	}
	if c.TLSOn() {
		t := c.TLS
		tc, err := tlsconf.Client(tlsconf.Files{CA: t.CA, Cert: t.Cert, Key: t.Key, ServerName: t.ServerName,
			InsecureSkipVerify: t.InsecureSkipVerify && t.AllowInsecure})
		if err != nil {
			return nil, fmt.Errorf("redis.%w", err)
		}
		o.TLSConfig = tc
	}
	return redis.NewUniversalClient(o), nil
}

// redisNode names one Redis in the log: its address, or the master name
// Sentinel answers for.
func redisNode(c config.Redis) string {
	if c.Sentinel.MasterName != "" {
		return "sentinel:" + c.Sentinel.MasterName
	}
	return c.HostPort()
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
func budgetsOf(cfg *config.Region) map[string]federation.Budget {
	var out map[string]federation.Budget
	for name, t := range cfg.Tenants {
		if out == nil {
			out = map[string]federation.Budget{}
		}
		out[name] = federation.Budget{MonthlyUSD: t.MonthlyBudgetUSD, Refuse: t.OverBudget == "refuse", PriceCap: t.PriceCap}
	}
	return out
}

func regionPools(cfg *config.Region) []region.Pool {
	var out []region.Pool
	for _, p := range cfg.Pools {
		rp := region.Pool{Name: p.Name, Tags: p.Tags, Slots: p.Slots, QueueCapacity: p.QueueCapacity, PricePerSlotHour: p.PricePerSlotHour,
			Spot: p.Spot, Discount: p.Discount, ScaleFromZero: p.ScaleFromZero, MaxWait: p.MaxWait}
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

// server is one running `ax server`: a region cell, the federation node and
// the HTTP API.
type server struct {
	cfg      *config.Region
	log      *slog.Logger
	regional *clientv3.Client
	global   *clientv3.Client
	// probes of the two etcds (one when they are the same): /readyz and the
	// ax_*_etcd_healthy gauges read them, so they agree within a probe.
	regionalProbe, globalProbe *lease.Probe
	redisProbe                 *redisProbe
	nodeProbe                  *nodeProbe           // a Redis Cluster's gates per master; nil on one Redis
	tracer                     trace.TracerProvider // nil: tracing off
	stopTracing                func()
	rdb                        redis.UniversalClient
	store                      *queue.Store
	view                       *federation.View
	node                       *federation.Node
	cell                       *region.Cell
	sched                      *schedule.Scheduler
	dags                       *dag.Runs
	http                       *http.Server
	auth                       *httpapi.Auth
	blocking                   redis.UniversalClient         // long-polls' own (queue.Options.Blocking)
	tls                        *tlsconf.Server               // nil: plain http
	quotas                     atomic.Pointer[config.Quotas] // SIGHUP replaces them
	ln                         net.Listener
	id                         string
	limits                     atomic.Pointer[[]queue.Limit]              // the region's limits (SIGHUP reloads them)
	fairShare                  atomic.Pointer[map[string]queue.FairShare] // by pool (SIGHUP reloads them)
	current                    atomic.Pointer[config.Region]              // the file as last (re)loaded: live overrides are checked against it
	overrides                  overrides                                  // live fair-share overrides seen (fairShares)
	slowLanes                  atomic.Pointer[map[string]region.SlowLane] // by pool (SIGHUP reloads them)
}

// startServer builds every piece; Run then serves until ctx ends.
// startServer assembles a region's server. ln, when not nil, is an already
// bound API listener (ax dev binds every port before it starts anything, so
// its own Redis and etcd children cannot take them); otherwise cfg.Listen is
// bound here. The server owns ln from here on, also on error.
// reg (nil: a new one) is the registry its /metrics exports.
func startServer(ctx context.Context, cfg *config.Region, ln net.Listener, reg *prometheus.Registry, log *slog.Logger) (*server, error) {
	s := &server{cfg: cfg, log: log.With("region", cfg.Name), ln: ln}
	ok := false
	defer func() {
		if !ok {
			if s.ln != nil {
				_ = s.ln.Close()
			}
			s.close()
		}
	}()
	rc := etcdConfig(cfg.Etcd.Regional, cfg.Etcd.Prefix, cfg.Etcd.SessionTTL)
	gc := etcdConfig(cfg.Etcd.Global, cfg.Etcd.Prefix, cfg.Etcd.SessionTTL).Or(rc)
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var err error
	if s.regional, err = rc.Dial(dctx); err != nil {
		return nil, fmt.Errorf("regional etcd %v: %w", rc.Endpoints, err)
	}
	if strings.Join(gc.Endpoints, ",") == strings.Join(rc.Endpoints, ",") {
		s.global = s.regional
	} else if s.global, err = gc.Dial(dctx); err != nil {
		// The region schedules its own work without the global etcd; but a
		// server needs it once to start.
		return nil, fmt.Errorf("global etcd %v: %w", gc.Endpoints, err)
	}
	if s.rdb, err = redisClient(cfg.Redis, 0); err != nil {
		return nil, err
	}
	// Long-polls wait on a client of their own, sized for the most that
	// may run at once, so they never take the submits' connections.
	if s.blocking, err = redisClient(cfg.Redis, cfg.HTTPServer.MaxLongPolls+2); err != nil {
		return nil, err
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		// Before any call: a node's gate is put on its client as the
		// client makes it.
		s.nodeProbe = newNodeProbe(cc, s.log)
		s.nodeProbe.gateCluster(cc)
		s.nodeProbe.gateCluster(s.blocking.(*redis.ClusterClient))
	}
	so := storeOptions(cfg)
	so.Blocking = s.blocking
	if s.store, err = queue.New(s.rdb, so); err != nil {
		return nil, err
	}
	if err := s.store.Ping(dctx); err != nil {
		return nil, err
	}
	var peerTLS *tls.Config
	if t := cfg.HTTPServer.TLS; t.On() {
		if s.tls, err = tlsconf.NewServer(t.Cert, t.Key, t.ClientCA); err != nil {
			return nil, fmt.Errorf("http_server.%w", err)
		}
		peerTLS, err = s.tls.Peer(t.CA)
	} else if t.CA != "" {
		peerTLS, err = tlsconf.Client(tlsconf.Files{CA: t.CA})
	}
	if err != nil {
		return nil, fmt.Errorf("http_server.%w", err)
	}
	if cfg.DataDir != "" {
		s.log.Warn("data_dir is not used (ax dev keeps its state under --dir); remove it from the file", "data_dir", cfg.DataDir)
	}
	if cfg.Auth.AllowInsecurePeers {
		s.log.Warn("auth.allow_insecure_peers is on: the cluster token may go to other regions in clear text")
	}
	if reg == nil {
		reg = newRegistry()
	}
	pc := placementConfig(cfg)
	s.view = federation.NewView(s.global, cfg.Etcd.Prefix, pc, cfg.Placement.UnhealthyGrace, s.log)
	// The view and the schedules export no region of their own: label them
	// with this server's, like every other series it exports.
	own := prometheus.WrapRegistererWith(prometheus.Labels{"region": cfg.Name}, reg)
	own.MustRegister(s.view.ConnectedGauge())
	s.regionalProbe = lease.NewProbe(s.regional, cfg.Etcd.Prefix+"ready-probe", 0, 0)
	s.globalProbe = s.regionalProbe
	if s.global != s.regional {
		s.globalProbe = lease.NewProbe(s.global, cfg.Etcd.Prefix+"ready-probe", 0, 0)
	}
	// provider: config says where the region runs; informational, for
	// dashboards to group regions by.
	own.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ax_region_info",
		Help:        "Always 1; its provider label is the region's provider: setting (aws, gcp, azure or other).",
		ConstLabels: prometheus.Labels{"provider": cfg.Provider}}, func() float64 { return 1 }))
	s.redisProbe = &redisProbe{ping: s.store.Ping}
	if s.nodeProbe == nil {
		// One Redis: the probe's health is its gate. (On a Cluster the
		// probe asks every master: one out would refuse the shards the
		// others serve; each node has its own gate, nodeProbe.)
		s.redisProbe.log = s.log.With("node", redisNode(cfg.Redis))
		s.rdb.AddHook(redisGate{func() *health { return &s.redisProbe.health }})
		s.blocking.AddHook(redisGate{func() *health { return &s.redisProbe.health }})
	}
	s.redisProbe.answered(time.Now()) // the Ping above
	own.MustRegister(s.redisProbe.gauge())
	own.MustRegister(probeGauge("ax_regional_etcd_healthy", "1 while this server's probe of its region's etcd answers (every 500 ms, 1 s timeout); /readyz is 503 while it is 0.", s.regionalProbe),
		probeGauge("ax_global_etcd_healthy", "1 while this server's probe of the global etcd answers (every 500 ms, 1 s timeout); /readyz reports global_etcd false while it is 0.", s.globalProbe))
	if s.ln == nil {
		if s.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
	}
	// listen: host:0 with the default public address: publish the port the
	// kernel chose, not ":0".
	for _, scheme := range []string{"http://", "https://"} {
		if cfg.PublicAddr == scheme+cfg.Listen && strings.HasSuffix(cfg.Listen, ":0") {
			cfg.PublicAddr = scheme + s.ln.Addr().String()
		}
	}
	host, _ := os.Hostname()
	s.id = fmt.Sprintf("%s/%s/%d", host, s.ln.Addr(), os.Getpid())
	// The cell first (the node wakes it and reads its figures), then the
	// node, then what builds on the node; Run starts the cell with the node
	// as its placer and the leader loops beside its own.
	lim := limitsOf(cfg)
	s.limits.Store(&lim)
	fs := fairShareOf(cfg)
	s.fairShare.Store(&fs)
	s.current.Store(cfg)
	sl := slowLanesOf(cfg)
	s.slowLanes.Store(&sl)
	s.cell = region.New(s.store, s.regional, s.global, region.Config{
		Region: cfg.Name, Provider: cfg.Provider, ID: s.id, API: cfg.PublicAddr, Pools: regionPools(cfg), Prefix: cfg.Etcd.Prefix,
		SessionTTL: cfg.Etcd.SessionTTL, Heartbeat: cfg.Lease.Heartbeat, Logger: s.log,
		Thresholds: thresholds(cfg.Thresholds), Preemption: preemption(cfg.Preemption), StarvationThreshold: cfg.StarvationThreshold,
		// Claims record the live price: the operator's override, if any.
		LivePrice: func(pool string) (float64, bool) { return s.view.PriceOverride(cfg.Name, pool) },
		Limits:    func() []queue.Limit { return *s.limits.Load() },
		FairShare: s.fairShares,
		SlowLanes: func() map[string]region.SlowLane { return *s.slowLanes.Load() },
	}, region.NewMetrics(reg))
	if s.tracer, s.stopTracing, err = startTracing(cfg, "ax-server", s.id); err != nil {
		return nil, err
	}
	s.node, err = federation.NewNode(federation.Config{
		Region: cfg.Name, Regions: cfg.Regions, ClusterToken: cfg.Auth.ClusterToken, Defaults: defaultsOf(cfg),
		Placement: pc, Logger: s.log, PeerTLS: peerTLS, AllowInsecurePeers: cfg.Auth.AllowInsecurePeers,
		TracerProvider: s.tracer, HandOffHorizon: cfg.Placement.HandOffHorizon, StuckPoolGrace: cfg.Placement.UnhealthyGrace, ReplaceOnPriceRise: cfg.Placement.ReplaceOnPriceRise,
		Backlog: s.maxBacklog, Budgets: budgetsOf(cfg), BudgetRefresh: cfg.BudgetRefresh,
	}, s.store, s.view, s.cell, federation.NewMetrics(reg))
	if err != nil {
		return nil, err
	}
	s.sched = schedule.New(s.global, s.node, schedule.Config{
		Region: cfg.Name, Regions: cfg.Regions, Defaults: defaultsOf(cfg),
		Prefix: cfg.Etcd.Prefix, ID: s.id, SessionTTL: cfg.Etcd.SessionTTL, Registerer: own, Logger: s.log})
	s.dags = dag.New(s.store, s.node, dag.Config{Region: cfg.Name, Regions: cfg.Regions, Defaults: defaultsOf(cfg), Backlog: s.maxBacklog, Registerer: reg, Logger: s.log})
	var pools []string
	for _, p := range cfg.Pools {
		pools = append(pools, p.Name)
	}
	s.quotas.Store(&cfg.Quotas)
	auth := &httpapi.Auth{Enabled: cfg.Auth.Enabled, ClusterToken: cfg.Auth.ClusterToken, Tokens: apiTokens(cfg)}
	s.auth = auth
	api := httpapi.New(s.node, httpapi.Config{
		// In ax dev the region's workers register with reg too.
		Auth: auth, MaxPayload: int(cfg.Task.MaxPayload), Gatherer: reg, Registerer: own, Pools: pools,
		Schedules: s.sched, DAGs: s.dags,
		Logger: s.log, LongPolls: cfg.HTTPServer.MaxLongPolls, LongPollsPerTenant: cfg.HTTPServer.MaxLongPollsPerTenant,
		Quota: func(tenant string) (float64, int) {
			q := s.quotas.Load().Quota(tenant)
			return q.SubmitsPerSecond, q.Burst
		},
		BatchMaxItems: cfg.Quotas.Batch.MaxItems, BatchMaxBytes: cfg.Quotas.Batch.MaxBytes,
		PublicDetails: cfg.HTTPServer.PublicDetails, MaxHeaderBytes: cfg.HTTPServer.MaxHeaderBytes,
		Ready: func(context.Context) error {
			if err := s.regionalProbe.Err(); err != nil {
				return fmt.Errorf("regional etcd: %w", err)
			}
			return nil
		},
		GlobalEtcd: s.globalProbe.Err,
	})
	hs := cfg.HTTPServer
	s.http = &http.Server{Handler: withWriteDeadline(forAPI(api), hs.WriteTimeout), ReadHeaderTimeout: hs.ReadHeaderTimeout, ReadTimeout: hs.ReadTimeout,
		WriteTimeout: hs.WriteTimeout, IdleTimeout: hs.IdleTimeout, MaxHeaderBytes: httpapi.HeaderReadLimit(hs.MaxHeaderBytes)}
	s.ln = httpapi.LimitListener(s.ln, hs.MaxConnections)
	if s.tls != nil {
		// After the cap: a handshake holds a connection like a request.
		s.ln = tls.NewListener(s.ln, s.tls.Config())
	}
	ok = true
	return s, nil
}

// Run serves until ctx ends, then shuts down in order: stop accepting
// requests (drain in-flight ones), stop the cell (resign), close the view,
// close the clients.
func (s *server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(6)
	go func() {
		defer wg.Done()
		s.node.BudgetLoop(cctx)
	}()
	go func() {
		defer wg.Done()
		s.redisProbe.run(cctx)
	}()
	if s.nodeProbe != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.nodeProbe.run(cctx)
		}()
	}
	go func() {
		defer wg.Done()
		federation.Announce(cctx, s.global, s.cfg.Etcd.Prefix, federation.ServerInfo{
			Region: s.cfg.Name, ID: s.id, API: s.cfg.PublicAddr, Started: time.Now().UTC()}, s.cfg.Etcd.SessionTTL, s.log)
	}()
	go func() {
		defer wg.Done()
		if err := s.cell.Run(cctx, s.node, s.node.OutboxLoop, s.node.HeldLoop, s.dags.Loop, s.node.StuckPoolLoop, s.node.ReplaceLoop); err != nil {
			errc <- fmt.Errorf("cell: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := s.sched.Run(cctx); err != nil {
			errc <- fmt.Errorf("schedules: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()
	s.log.Info("ax server started", "listen", s.ln.Addr().String(), "public", s.cfg.PublicAddr, "id", s.id,
		"auth", s.cfg.Auth.Enabled, "tls", s.tls != nil, "version", buildinfo.Get().Version, "commit", buildinfo.Get().Commit)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = s.http.Shutdown(sctx)
	scancel()
	cancel()
	wg.Wait()
	s.close()
	s.log.Info("ax server stopped")
	return err
}

func (s *server) close() {
	if s.stopTracing != nil {
		s.stopTracing()
	}
	if s.view != nil {
		s.view.Close()
	}
	if s.globalProbe != nil && s.globalProbe != s.regionalProbe {
		s.globalProbe.Close()
	}
	if s.regionalProbe != nil {
		s.regionalProbe.Close()
	}
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.blocking != nil {
		_ = s.blocking.Close()
	}
	if s.global != nil && s.global != s.regional {
		_ = s.global.Close()
	}
	if s.regional != nil {
		_ = s.regional.Close()
	}
}

// startTracing is the OpenTelemetry provider of cfg.Tracing (nil, and a
// no-op stop, when tracing is off); stop flushes what is buffered.
func startTracing(cfg *config.Region, service, instance string) (trace.TracerProvider, func(), error) {
	if cfg.Tracing.Endpoint == "" {
		return nil, func() {}, nil
	}
	p, err := tracing.New(tracing.Config{Endpoint: cfg.Tracing.Endpoint, SampleRatio: cfg.Tracing.SampleRatio,
		Service: service, Region: cfg.Name, Instance: instance})
	if err != nil {
		return nil, nil, err
	}
	return p, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	}, nil
}

// probeGauge exports a probe's health as 1 or 0.
func probeGauge(name, help string, p *lease.Probe) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		if p.Healthy() {
			return 1
		}
		return 0
	})
}

func poolNames(cfg *config.Region) string {
	var n []string
	for _, p := range cfg.Pools {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// apiTokens are the region file's API tokens as the API checks them.
func apiTokens(cfg *config.Region) []httpapi.Token {
	var ts []httpapi.Token
	for _, t := range cfg.Auth.Tokens {
		role, _ := httpapi.ParseRole(t.Role)
		ts = append(ts, httpapi.Token{Name: t.Name, SHA256: t.TokenSHA256, Role: role, Tenant: t.Tenant, Expires: t.Expires()})
	}
	return ts
}

// reloadTokens re-reads file's API tokens into the running server (SIGHUP).
// A file that does not load or validate changes nothing.
func (s *server) reloadTokens(file string) {
	cfg, err := config.Load(file)
	if err == nil {
		err = cfg.ValidateServer()
	}
	if err != nil {
		s.log.Error("SIGHUP: config not reloaded", "err", err)
		return
	}
	s.reload(cfg)
}

// reload puts cfg's API tokens, limits, fair shares, quotas and budgets in service and re-reads
// the API certificate (SIGHUP, in ax server and ax dev).
func (s *server) reload(cfg *config.Region) {
	s.auth.SetTokens(apiTokens(cfg))
	l := limitsOf(cfg)
	s.limits.Store(&l)
	fs := fairShareOf(cfg)
	s.fairShare.Store(&fs)
	s.current.Store(cfg)
	sl := slowLanesOf(cfg)
	s.slowLanes.Store(&sl)
	s.quotas.Store(&cfg.Quotas)
	s.node.SetBudgets(budgetsOf(cfg))
	s.log.Info("SIGHUP: API tokens, limits and quotas reloaded", "tokens", len(cfg.Auth.Tokens), "limits", len(l), "fair_share_pools", len(fs), "slow_lane_pools", len(sl))
	if s.tls != nil {
		// The files the server started with, re-read (new paths need a
		// restart).
		if err := s.tls.Reload(); err != nil {
			s.log.Error("SIGHUP: API certificate not reloaded", "err", err)
			return
		}
		s.log.Info("SIGHUP: API certificate reloaded")
	}
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

// fairShares are the region's fair shares by pool now, as the leader writes
// them to the store: the file's (SIGHUP reloads them), each pool's replaced
// by its live override in the global etcd (/ax/fairshare/<region>/<pool>)
// while one is set and valid; null there turns the pool's off. An invalid
// override changes nothing (the pool keeps the override last applied, or
// its file's). Each value written is decoded, checked and logged once.
func (s *server) fairShares() map[string]queue.FairShare {
	file := *s.fairShare.Load()
	ov := s.view.FairShareOverrides(s.cfg.Name)
	c := &s.overrides
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(ov) == 0 && len(c.byKey) == 0 {
		return file
	}
	if c.byKey == nil {
		c.byKey = map[string]override{}
	}
	out := maps.Clone(file)
	set := map[string]bool{}
	for pool, b := range ov {
		key := s.cfg.Etcd.Prefix + "fairshare/" + s.cfg.Name + "/" + pool
		set[key] = true
		o, seen := c.byKey[key]
		if !seen || o.value != string(b) {
			o.value = string(b)
			switch fs, err := s.current.Load().FairShareOverride(key, pool, b); {
			case err != nil:
				s.log.Error("fair-share override ignored: the pool keeps the fair share it had", "key", key, "err", err)
			default:
				s.log.Info("fair-share override applied", "key", key, "value", o.value)
				o.share, o.applied = nil, true
				if fs != nil {
					q := queueFairShare(*fs)
					o.share = &q
				}
			}
			c.byKey[key] = o
		}
		if !o.applied {
			continue
		}
		if o.share == nil {
			delete(out, pool)
		} else {
			out[pool] = *o.share
		}
	}
	for key := range c.byKey {
		if !set[key] {
			delete(c.byKey, key)
			s.log.Info("fair-share override removed: the pool's file share is back", "key", key)
		}
	}
	return out
}

// overrides remembers each live fair-share override by its etcd key.
type overrides struct {
	mu    sync.Mutex
	byKey map[string]override
}

// override is one key's value as last seen and the override last applied
// under the key, which an invalid value leaves in force.
type override struct {
	value   string
	applied bool             // a valid value was seen under the key
	share   *queue.FairShare // what it applied; nil: fair share off
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

// maxBacklog is tenant's max_backlog in this region (0: none), as last
// loaded (SIGHUP reloads it).
func (s *server) maxBacklog(tenant string) int {
	if q := s.quotas.Load(); q != nil {
		return q.Quota(tenant).MaxBacklog
	}
	return 0
}

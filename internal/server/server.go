package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/batch"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/httpapi/history"
	"github.com/ax-sched/ax/internal/buildinfo"
	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/config/quotas"
	"github.com/ax-sched/ax/internal/tlsconf"
	"github.com/ax-sched/ax/internal/tracing"
	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/health"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/region/identity"
	"github.com/ax-sched/ax/schedule"
	"github.com/ax-sched/ax/schedule/ends"
	"github.com/ax-sched/ax/worker/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
)

// Server is one running `ax server`: a region cell, the federation node and
// the HTTP API.
type Server struct {
	cfg      *config.Region
	log      *slog.Logger
	regional *clientv3.Client
	global   *clientv3.Client
	// probes of the two etcds (one when they are the same): /readyz and the
	// ax_*_etcd_healthy gauges read them, so they agree within a probe.
	regionalProbe, globalProbe *lease.Probe
	redisProbe                 *health.Probe
	nodeProbe                  *health.NodeProbe    // a Redis Cluster's gates per master; nil on one Redis
	history                    *history.Ring        // the dashboard's charts (GET /v1/history)
	tracer                     trace.TracerProvider // nil: tracing off
	stopTracing                func()
	rdb                        redis.UniversalClient
	store                      *store.Store
	view                       *view.View
	node                       *federation.Node
	cell                       *region.Cell
	sched                      *schedule.Scheduler
	dags                       *dag.Runs
	batches                    *batch.Batches
	http                       *http.Server
	auth                       *httpapi.Auth
	blocking                   redis.UniversalClient         // long-polls' own (queue.Options.Blocking)
	tls                        *tlsconf.Server               // nil: plain http
	quotas                     atomic.Pointer[quotas.Quotas] // SIGHUP replaces them
	ln                         net.Listener
	id                         string
	limits                     atomic.Pointer[[]queue.Limit]              // the region's limits (SIGHUP reloads them)
	fairShare                  atomic.Pointer[map[string]queue.FairShare] // by pool (SIGHUP reloads them)
	current                    atomic.Pointer[config.Region]              // the file as last (re)loaded: live overrides are checked against it
	overrides                  overrides                                  // live fair-share overrides seen (fairShares)
	slowLanes                  atomic.Pointer[map[string]region.SlowLane] // by pool (SIGHUP reloads them)
}

// Start assembles a region's server; Run then serves until its context
// ends. ln, when not nil, is an already bound API listener (ax dev binds
// every port before it starts anything, so its own Redis and etcd children
// cannot take them); otherwise cfg.Listen is bound here. The server owns ln
// from here on, also on error. reg (nil: a new one) is the registry its
// /metrics exports.
func Start(ctx context.Context, cfg *config.Region, ln net.Listener, reg *prometheus.Registry, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: log.With("region", cfg.Name), ln: ln}
	ok := false
	defer func() {
		if !ok {
			if s.ln != nil {
				_ = s.ln.Close()
			}
			s.close()
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := s.dial(dctx); err != nil {
		return nil, err
	}
	peerTLS, err := s.apiTLS()
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
		reg = NewRegistry()
	}
	pc := placementConfig(cfg)
	s.view = view.New(s.global, cfg.Etcd.Prefix, pc, cfg.Placement.UnhealthyGrace, s.log)
	// The view and the schedules export no region of their own: label them
	// with this server's, like every other series it exports.
	own := prometheus.WrapRegistererWith(prometheus.Labels{"region": cfg.Name}, reg)
	own.MustRegister(s.view.ConnectedGauge())
	s.startProbes(own)
	if err := s.listen(); err != nil {
		return nil, err
	}
	if err := s.assemble(pc, peerTLS, reg, own); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// dial connects the etcds and the Redis clients, gates a Redis Cluster's
// nodes and checks the store.
func (s *Server) dial(ctx context.Context) error {
	cfg := s.cfg
	rc := etcdConfig(cfg.Etcd.Regional, cfg.Etcd.Prefix, cfg.Etcd.SessionTTL)
	gc := etcdConfig(cfg.Etcd.Global, cfg.Etcd.Prefix, cfg.Etcd.SessionTTL).Or(rc)
	var err error
	if s.regional, err = rc.Dial(ctx); err != nil {
		return fmt.Errorf("regional etcd %v: %w", rc.Endpoints, err)
	}
	if strings.Join(gc.Endpoints, ",") == strings.Join(rc.Endpoints, ",") {
		s.global = s.regional
	} else if s.global, err = s.dialGlobal(ctx, gc); err != nil {
		// The region schedules its own work without the global etcd; but a
		// server needs it once to start.
		return fmt.Errorf("global etcd %v: %w", gc.Endpoints, err)
	}
	guard := identity.NewGuard(redisNode(cfg.Redis), redisIdentity(cfg, s.federationID(ctx)), true, s.log)
	if s.rdb, err = redisClient(cfg.Redis, 0, guard); err != nil {
		return err
	}
	// Long-polls wait on a client of their own, sized for the most that
	// may run at once, so they never take the submits' connections.
	if s.blocking, err = redisClient(cfg.Redis, cfg.HTTPServer.MaxLongPolls+2, guard); err != nil {
		return err
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		// Before any call: a node's gate is put on its client as the
		// client makes it.
		s.nodeProbe = health.NewNodeProbe(cc, s.log)
		s.nodeProbe.GateCluster(cc)
		s.nodeProbe.GateCluster(s.blocking.(*redis.ClusterClient))
	}
	so := storeOptions(cfg)
	so.Blocking = s.blocking
	if s.store, err = store.New(s.rdb, so); err != nil {
		return err
	}
	if err := s.store.Ping(ctx); err != nil {
		return redisUnreachable(cfg, err)
	}
	return nil
}

// globalDials is how many times a server starting dials the global etcd
// before it gives up: a link to another continent may be down for seconds
// (a flap) and a server started then starts once it comes back.
const globalDials = 4

// dialGlobal dials the global etcd up to globalDials times, a second apart;
// a configuration error fails at once.
func (s *Server) dialGlobal(ctx context.Context, gc lease.Config) (*clientv3.Client, error) {
	for try := 1; ; try++ {
		cli, err := gc.Dial(ctx)
		var cerr *lease.ConfigError
		if err == nil || try == globalDials || errors.As(err, &cerr) {
			return cli, err
		}
		s.log.Warn("global etcd unreachable; dialling again", "endpoints", gc.Endpoints, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// apiTLS loads the API's certificate (nil: plain http) and returns the TLS
// configuration of calls to peer regions (nil: the system's).
func (s *Server) apiTLS() (*tls.Config, error) {
	t := s.cfg.HTTPServer.TLS
	if t.On() {
		var err error
		if s.tls, err = tlsconf.NewServer(t.Cert, t.Key, t.ClientCA); err != nil {
			return nil, err
		}
		return s.tls.Peer(t.CA)
	}
	if t.CA != "" {
		return tlsconf.Client(tlsconf.Files{CA: t.CA})
	}
	return nil, nil
}

// startProbes builds the probes of the etcds and of Redis, gates the
// clients of one Redis, and exports the probes' health and the region's
// info to own.
func (s *Server) startProbes(own prometheus.Registerer) {
	cfg := s.cfg
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
	if s.nodeProbe == nil {
		// One Redis: the probe's health is its gate. (On a Cluster the
		// probe asks every master: one out would refuse the shards the
		// others serve; each node has its own gate, nodeProbe.)
		s.redisProbe = health.NewProbe(s.store.Ping, s.log.With("node", redisNode(cfg.Redis)))
		s.rdb.AddHook(s.redisProbe.Gate())
		s.blocking.AddHook(s.redisProbe.Gate())
	} else {
		s.redisProbe = health.NewProbe(s.store.Ping, nil)
	}
	s.redisProbe.Answered(time.Now()) // the store's Ping in dial
	own.MustRegister(s.redisProbe.Gauge())
	own.MustRegister(probeGauge("ax_regional_etcd_healthy", "1 while this server's probe of its region's etcd answers (every 500 ms, 1 s timeout); /readyz is 503 while it is 0.", s.regionalProbe),
		probeGauge("ax_global_etcd_healthy", "1 while this server's probe of the global etcd answers (every 500 ms, 1 s timeout); /readyz reports global_etcd false while it is 0.", s.globalProbe))
}

// listen binds cfg.Listen unless the server was given its listener, and
// names the server after it.
func (s *Server) listen() error {
	cfg := s.cfg
	if s.ln == nil {
		var err error
		if s.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.Listen, err)
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
	return nil
}

// assemble builds the cell first (the node wakes it and reads its
// figures), then the node, then what builds on the node, and the HTTP
// server; Run starts the cell with the node as its placer and the leader
// loops beside its own.
func (s *Server) assemble(pc placement.Config, peerTLS *tls.Config, reg *prometheus.Registry, own prometheus.Registerer) error {
	cfg := s.cfg
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
	var err error
	if s.tracer, s.stopTracing, err = startTracing(cfg, "ax-server", s.id); err != nil {
		return err
	}
	if cfg.Tracing.Redis {
		tracing.Hooks(s.rdb, s.tracer, redisNode(cfg.Redis))
		tracing.Hooks(s.blocking, s.tracer, redisNode(cfg.Redis))
	}
	// One reserve for the API's submits, schedule slots and hand-offs
	// received: the bytes each admits count against the same reading.
	reserve := httpapi.NewReserve(s.memoryReserve, s.memory)
	s.node, err = federation.NewNode(federation.Config{
		Region: cfg.Name, Regions: cfg.Regions, ClusterToken: cfg.Auth.ClusterToken, Defaults: defaultsOf(cfg),
		Placement: pc, Logger: s.log, PeerTLS: peerTLS, AllowInsecurePeers: cfg.Auth.AllowInsecurePeers,
		TracerProvider: s.tracer, HandOffHorizon: cfg.Placement.HandOffHorizon, StuckPoolGrace: cfg.Placement.UnhealthyGrace, ReplaceOnPriceRise: cfg.Placement.ReplaceOnPriceRise,
		Backlog: s.maxBacklog, BacklogBytes: s.maxBacklogBytes, Budgets: budgetsOf(cfg), BudgetRefresh: cfg.BudgetRefresh,
		MemoryAdmit:  reserve.Admit,
		BudgetShares: budget.EtcdShares{Client: s.global}, SharesPrefix: cfg.Etcd.Prefix + "budgets/",
	}, s.store, s.view, s.cell, metrics.New(reg))
	if err != nil {
		return err
	}
	s.dags = dag.New(s.store.DAGs(), s.node, dag.Config{Region: cfg.Name, Regions: cfg.Regions, Defaults: defaultsOf(cfg), Backlog: s.maxBacklog, Registerer: reg, Logger: s.log})
	// Run ends (of DAG runs and single tasks that schedules started) go
	// through the global etcd to the gates waiting for them.
	runEnds := ends.New(s.global, cfg.Etcd.Prefix)
	s.batches = batch.New(s.store.Batches(), s.node, batch.Config{Region: cfg.Name, Regions: cfg.Regions, Defaults: defaultsOf(cfg),
		Retain: s.store.Options().RetainSuccess, RunEnded: runEnds.RunEnded, Logger: s.log})
	s.sched = schedule.New(s.global, s.node, schedule.Config{
		Region: cfg.Name, Regions: cfg.Regions, Defaults: defaultsOf(cfg), DAGs: s.dags, BudgetRoom: s.node.BudgetRoom,
		Prefix: cfg.Etcd.Prefix, ID: s.id, SessionTTL: cfg.Etcd.SessionTTL, Registerer: own, Logger: s.log,
		Limits: func(tenant string) schedule.Limits {
			if q := s.quotas.Load(); q != nil {
				return q.Schedules(tenant)
			}
			return schedule.Limits{}
		}})
	// Gates: run ends through the global etcd, reruns from the schedules.
	s.dags.SetUpstreams(struct {
		*ends.Log
		*schedule.Scheduler
	}{runEnds, s.sched})
	s.serveAPI(reg, own, reserve)
	return nil
}

// memory is how full the region's Redis is, for the API's memory reserve.
func (s *Server) memory(ctx context.Context) (httpapi.MemoryUse, error) {
	m, err := s.store.Submitter().Memory(ctx)
	return httpapi.MemoryUse{Used: m.Used, Max: m.Max, Top: m.Top}, err
}

// serveAPI builds the HTTP API and the server and listener that serve it.
func (s *Server) serveAPI(reg *prometheus.Registry, own prometheus.Registerer, reserve *httpapi.Reserve) {
	cfg := s.cfg
	var pools []string
	for _, p := range cfg.Pools {
		pools = append(pools, p.Name)
	}
	s.quotas.Store(&cfg.Quotas)
	s.auth = apiAuth(cfg, s.log)
	px := proxy.New(s.store.Claimer(), s.log)
	api := httpapi.New(s.node, httpapi.Config{
		// In ax dev the region's workers register with reg too.
		Auth: s.auth, MaxPayload: int(cfg.Task.MaxPayload), Gatherer: reg, Registerer: own, Pools: pools,
		Schedules: s.sched, DAGs: s.dags, Batches: s.batches,
		Logger: s.log, LongPolls: cfg.HTTPServer.MaxLongPolls, LongPollsPerTenant: cfg.HTTPServer.MaxLongPollsPerTenant,
		Quota: func(tenant string) (float64, int) {
			q := s.quotas.Load().Quota(tenant)
			return q.SubmitsPerSecond, q.Burst
		},
		BatchMaxItems: cfg.Quotas.Batch.MaxItems, BatchMaxBytes: cfg.Quotas.Batch.MaxBytes,
		Reserve:       reserve,
		PublicDetails: cfg.HTTPServer.PublicDetails, Profiling: cfg.HTTPServer.Profiling, MaxHeaderBytes: cfg.HTTPServer.MaxHeaderBytes,
		Workers: httpapi.WorkerConfig{Limits: httpapi.WorkerLimits{MaxResultBytes: cfg.Results.MaxBytes,
			MaxWait: cfg.RemoteWorkers.MaxWait, LongPolls: cfg.RemoteWorkers.MaxLongPolls, LongPollsPerToken: cfg.RemoteWorkers.MaxLongPollsPerToken},
			Store: httpapi.WorkerStore{Claimer: px, Recorder: px, Reader: s.store, Redis: s.rdb,
				Heartbeat: cfg.Lease.Heartbeat}},
		Ready: func(context.Context) error {
			if err := s.regionalProbe.Err(); err != nil {
				return fmt.Errorf("regional etcd: %w", err)
			}
			return nil
		},
		GlobalEtcd: s.globalProbe.Err,
	})
	s.history = api.History()
	hs := cfg.HTTPServer
	s.http = &http.Server{Handler: tracing.Handler(s.tracer, withWriteDeadline(gated(api), hs.WriteTimeout)), ReadHeaderTimeout: hs.ReadHeaderTimeout, ReadTimeout: hs.ReadTimeout,
		WriteTimeout: hs.WriteTimeout, IdleTimeout: hs.IdleTimeout, MaxHeaderBytes: httpapi.HeaderReadLimit(hs.MaxHeaderBytes),
		ConnContext: httpapi.ConnContext}
	s.ln = httpapi.NewListener(s.ln, httpapi.ListenerOptions{Max: hs.MaxConnections, PerClient: hs.MaxConnectionsPerClient,
		FirstRequest: hs.FirstRequestTimeout})
	if s.tls != nil {
		// After the cap: a handshake holds a connection like a request.
		s.ln = tls.NewListener(s.ln, s.tls.Config())
	}
}

// gated marks every request's context as an API request's: its Redis
// calls go through the health gates.
func gated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(health.Gated(r.Context())))
	})
}

// Run serves until ctx ends, then shuts down in order: stop accepting
// requests (drain in-flight ones), stop the cell (resign), close the view,
// close the clients.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(7)
	go func() {
		defer wg.Done()
		s.node.BudgetLoop(cctx)
	}()
	go func() {
		defer wg.Done()
		s.node.FlightsLoop(cctx)
	}()
	go func() {
		defer wg.Done()
		s.redisProbe.Run(cctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.history.Run(cctx)
	}()
	if s.nodeProbe != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.nodeProbe.Run(cctx)
		}()
	}
	go func() {
		defer wg.Done()
		view.Announce(cctx, s.global, s.cfg.Etcd.Prefix, view.ServerInfo{
			Region: s.cfg.Name, ID: s.id, API: s.cfg.PublicAddr, Started: time.Now().UTC()}, s.cfg.Etcd.SessionTTL, s.log)
	}()
	go func() {
		defer wg.Done()
		if err := s.cell.Run(cctx, s.node, s.node.OutboxLoop, s.node.HeldLoop, s.dags.Loop, s.batches.Loop, s.node.StuckPoolLoop, s.node.ReplaceLoop, s.node.SharesLoop); err != nil {
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

func (s *Server) close() {
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
	tc := tracing.Config{Endpoint: cfg.Tracing.Endpoint, Protocol: cfg.Tracing.Protocol, SampleRatio: cfg.Tracing.SampleRatio,
		Service: service, Region: cfg.Name, Instance: instance}
	if !tc.Enabled() {
		return nil, func() {}, nil
	}
	p, err := tracing.New(tc)
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

package fedtest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The three regions of the harness, on three clouds.
const (
	AWS = "aws-use1"  // AWS us-east-1
	GCP = "gcp-euw4"  // GCP europe-west4
	AZ  = "az-eastus" // Azure eastus
)

var Regions = []string{AWS, GCP, AZ}

// Pool names; the same three in every region (a pool is region/name).
const (
	PoolCPU  = "cpu"      // on-demand CPU, one slot per vCPU
	PoolSpot = "cpu-spot" // spot CPU, one slot per vCPU
	PoolGPU  = "gpu"      // one slot per GPU
)

// Timings of the harness, short so the whole package runs in well under
// 90 s with -race: the etcd session TTL (etcd's minimum with the embedded
// server's election timeout), stale_after, the view's health grace period,
// how often leaders publish figures, and the workers' heartbeat.
const (
	TTL       = 2 * time.Second
	Stale     = 3 * time.Second
	Grace     = time.Second
	Publish   = 250 * time.Millisecond
	Heartbeat = 500 * time.Millisecond
	// WorkerBeat is how often a test's worker heartbeats (the cell forgets a
	// Worker after 3 × Heartbeat + 1 s of silence).
	WorkerBeat = 300 * time.Millisecond
)

// Tokens of the harness's auth config.
const (
	TokAcme              = "tok-acme-submitter"    // submitter, tenant acme
	TokGlobex            = "tok-globex-submitter"  // submitter, tenant globex
	TokGlobexOps         = "tok-globex-operator"   // operator, tenant globex only
	TokOperator          = "tok-operator"          // operator, every tenant
	TokAdmin             = "tok-admin"             // admin, every tenant
	TokCluster           = "tok-cluster-secret-42" // Server to server
	TokUnknown           = "tok-nobody"
	DefaultQueueCapacity = 1000
)

// PoolSpec is one configured pool; price per slot-hour from
// /work/shared/data/prices.csv (see PricedPools).
type PoolSpec struct {
	Name  string
	Tags  map[string]string
	Price float64
	Spot  bool
}

// PricedPools are the harness's pools, priced from
// /work/shared/data/prices.csv (on-demand and spot columns). CPU pools have
// one slot per vCPU, so price per slot-hour = VM price ÷ vCPUs; GPU pools
// one slot per GPU (every VM used has one GPU).
//
//	cheapest spot CPU:      AZ 0.00528 < GCP 0.0177175 < AWS 0.02215
//	cheapest on-demand CPU: AWS 0.048 = AZ 0.048 < GCP 0.0534575 (tie → region name)
//	a100:                   GCP 2.42771 < AZ 3.673;  l4: AWS only
var PricedPools = map[string][]PoolSpec{
	AWS: {
		// AWS,us-east-1,m6i.xlarge,4 vCPU: 0.192 on-demand, 0.088600 spot.
		{Name: PoolCPU, Tags: map[string]string{"arch": "x86", "class": "on-demand"}, Price: 0.192 / 4},
		{Name: PoolSpot, Tags: map[string]string{"arch": "x86", "class": "spot"}, Price: 0.0886 / 4, Spot: true},
		// AWS,us-east-1,g6.xlarge,1 × L4: 0.8048 on-demand.
		{Name: PoolGPU, Tags: map[string]string{"gpu": "l4"}, Price: 0.8048},
	},
	GCP: {
		// GCP,europe-west4,n2-standard-4,4 vCPU: 0.21383 on-demand, 0.07087 spot.
		{Name: PoolCPU, Tags: map[string]string{"arch": "x86", "class": "on-demand"}, Price: 0.21383 / 4},
		{Name: PoolSpot, Tags: map[string]string{"arch": "x86", "class": "spot"}, Price: 0.07087 / 4, Spot: true},
		// GCP,europe-west4,a2-highgpu-1g: 0.81406 for the VM plus 1.61365 for its
		// one A100 (GCP bills the GPU on its own row).
		{Name: PoolGPU, Tags: map[string]string{"gpu": "a100"}, Price: 0.81406 + 1.61365},
	},
	AZ: {
		// azure,eastus,Standard_D4s_v5,4 vCPU: 0.192 on-demand, 0.02112 spot.
		{Name: PoolCPU, Tags: map[string]string{"arch": "x86", "class": "on-demand"}, Price: 0.192 / 4},
		{Name: PoolSpot, Tags: map[string]string{"arch": "x86", "class": "spot"}, Price: 0.02112 / 4, Spot: true},
		// azure,eastus,Standard_NC24ads_A100_v4,1 × A100-80GB: 3.673 on-demand.
		{Name: PoolGPU, Tags: map[string]string{"gpu": "a100"}, Price: 3.673},
	},
}

func PriceOf(regionName, pool string) float64 {
	for _, p := range PricedPools[regionName] {
		if p.Name == pool {
			return p.Price
		}
	}
	panic("no pool " + regionName + "/" + pool)
}

// config tunes a harness.
type config struct {
	capacity map[string]int // "region/pool" → queue capacity (default DefaultQueueCapacity)
	slots    map[string]int // "region/pool" → slots of the worker the harness registers (0: none)
	soft     float64
	hard     float64
	stuck    time.Duration  // re-placement grace of pools without workers (0: the default)
	horizon  time.Duration  // hand-off horizon (0: the default)
	backlog  map[string]int // "region/tenant" → max_backlog (none: no limit)
	budgets  map[string]budget.Budget
	shares   bool // the regions share their tenants' refuse budgets in the etcd (WithBudgetShares)
}

type Option func(*config)

// WithCapacity sets one pool's queue capacity.
func WithCapacity(regionName, pool string, n int) Option {
	return func(c *config) { c.capacity[regionName+"/"+pool] = n }
}

// WithBacklog sets a tenant's max_backlog in one region.
func WithBacklog(regionName, tenant string, n int) Option {
	return func(c *config) {
		if c.backlog == nil {
			c.backlog = map[string]int{}
		}
		c.backlog[regionName+"/"+tenant] = n
	}
}

// WithBudget sets a tenant's monthly budget on every server.
func WithBudget(tenant string, b budget.Budget) Option {
	return func(c *config) {
		if c.budgets == nil {
			c.budgets = map[string]budget.Budget{}
		}
		c.budgets[tenant] = b
	}
}

// WithBudgetShares makes every server hold refuse budgets in its store's
// ledger, each region's share kept in the etcd by its leader (ax server's
// budget.EtcdShares and SharesLoop).
func WithBudgetShares() Option { return func(c *config) { c.shares = true } }

// WithSlots sets the slots of the worker registered for one pool (0: no
// worker).
func WithSlots(regionName, pool string, n int) Option {
	return func(c *config) { c.slots[regionName+"/"+pool] = n }
}

// WithStuckGrace sets the re-placement grace of pools without workers (0:
// the default).
func WithStuckGrace(d time.Duration) Option { return func(c *config) { c.stuck = d } }

// WithHandOffHorizon sets how long a hand-off that may have reached an
// unreachable target waits before it is placed again (0: the default).
func WithHandOffHorizon(d time.Duration) Option { return func(c *config) { c.horizon = d } }

// WithoutGPUWorkers registers no worker for any GPU pool.
func WithoutGPUWorkers() Option {
	return func(c *config) {
		for _, r := range Regions {
			c.slots[r+"/"+PoolGPU] = 0
		}
	}
}

// Fed is three regions on one embedded etcd and three redis-servers, each
// region with one server (store → view → node → API → cell), assembled as
// cmd/ax/runtime.go does.
type Fed struct {
	T         *testing.T
	Etcd      *testenv.Etcd
	EtcdCli   *clientv3.Client // the test's own client (price overrides)
	Placement placement.Config
	Log       *slog.Logger
	HTTP      *http.Client

	api     API
	cfg     config
	regions map[string]*Region
	zombies sync.WaitGroup // crashed servers still winding down
}

// Region is one region: its Redis and store outlive its server, which
// tests kill and restart.
type Region struct {
	f     *Fed
	Name  string
	Redis *testenv.Redis
	Store *store.Store
	// Later reads the same Redis an hour ahead: its Outbox lists every
	// hand-off in flight, not only those due now. Read-only use.
	Later *store.Store
	Pools []region.Pool

	// Intercept, when set, sees every request to the region's server first
	// and decides what reaches the API (next).
	Intercept atomic.Pointer[func(w http.ResponseWriter, r *http.Request, next http.Handler)]

	mu  sync.Mutex
	srv *Server
}

// Server is one running ax server of a region.
type Server struct {
	Cli  *clientv3.Client
	View *view.View
	Node *federation.Node
	Cell *region.Cell
	HTTP *httptest.Server
	Reg  *prometheus.Registry

	// Region is the region the server serves.
	Region *Region

	api    atomic.Pointer[http.Handler] // replaced by Serve
	cancel context.CancelFunc
	done   chan struct{}
}

// API builds a region server's HTTP API. fedtest assembles the rest of a
// server (store, view, node, cell) and takes the API from its caller —
// package fedapi passes httpapi's — so it imports federation and none of
// schedule, dag or httpapi.
type API func(s *Server) http.Handler

// Serve makes the server answer through h from now on (a server started
// with more, e.g. schedules, serves a fuller API).
func (s *Server) Serve(h http.Handler) { s.api.Store(&h) }

// New starts the harness's federation, every region's server answering
// through the API api builds.
func New(t *testing.T, api API, opts ...Option) *Fed {
	t.Helper()
	cfg := config{capacity: map[string]int{}, slots: map[string]int{}, soft: 0.6, hard: 0.8}
	for _, r := range Regions {
		cfg.slots[r+"/"+PoolCPU] = 4
		cfg.slots[r+"/"+PoolSpot] = 4
		cfg.slots[r+"/"+PoolGPU] = 1
	}
	for _, o := range opts {
		o(&cfg)
	}
	f := &Fed{T: t, api: api, cfg: cfg, regions: map[string]*Region{}, HTTP: &http.Client{Timeout: 30 * time.Second}}
	f.Log = slog.New(slog.DiscardHandler)
	if os.Getenv("AX_TEST_LOG") != "" {
		f.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	f.Placement = placement.DefaultConfig()
	f.Placement.StaleAfter = Stale
	// docs/architecture.md §6: ≥ 80 % non-critical work goes elsewhere or gets 429; below it
	// a pool scores at its price (soft: validated only, see placement.Config.SoftWatermark).
	f.Placement.SoftWatermark, f.Placement.HardWatermark = cfg.soft, cfg.hard
	f.Etcd = testenv.StartEtcd(t)
	f.EtcdCli = f.Etcd.Client()
	t.Cleanup(f.HTTP.CloseIdleConnections)
	for _, name := range Regions {
		r := &Region{f: f, Name: name, Redis: testenv.StartRedis(t)}
		st, err := store.New(r.Redis.Client(), queue.Options{Region: name})
		if err != nil {
			t.Fatal(err)
		}
		r.Store = st
		if r.Later, err = store.New(r.Redis.Client(), queue.Options{Region: name,
			Now: func() time.Time { return time.Now().Add(time.Hour) }}); err != nil {
			t.Fatal(err)
		}
		for _, p := range PricedPools[name] {
			qc := DefaultQueueCapacity
			if c, ok := cfg.capacity[name+"/"+p.Name]; ok {
				qc = c
			}
			r.Pools = append(r.Pools, region.Pool{Name: p.Name, Tags: p.Tags, QueueCapacity: qc,
				PricePerSlotHour: p.Price, Spot: p.Spot})
		}
		f.regions[name] = r
	}
	// Servers stop before their Redis and etcd (cleanups run last-in first).
	t.Cleanup(func() {
		for _, r := range f.regions {
			r.Stop()
		}
		f.zombies.Wait()
	})
	for _, name := range Regions {
		f.regions[name].Start()
	}
	for _, name := range Regions {
		for _, p := range PricedPools[name] {
			if n := cfg.slots[name+"/"+p.Name]; n > 0 {
				f.Worker(name, p.Name, n)
			}
		}
	}
	f.WaitReady()
	return f
}

// R returns a region.
func (f *Fed) R(name string) *Region { return f.regions[name] }

// Start assembles and runs the region's server as cmd/ax/runtime.go does.
func (r *Region) Start() {
	t := r.f.T
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		t.Fatalf("%s already running", r.Name)
	}
	cli := r.f.Etcd.Client()
	reg := prometheus.NewRegistry()
	log := r.f.Log.With("server", r.Name)
	view := view.New(cli, "/ax/", r.f.Placement, Grace, log)
	s := &Server{Cli: cli, View: view, Reg: reg, Region: r, done: make(chan struct{})}
	// The HTTP server first (the cell publishes its address); it serves
	// the API stored below, before anyone learns the address.
	s.HTTP = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		api := *s.api.Load()
		if f := r.Intercept.Load(); f != nil {
			(*f)(w, req, api)
			return
		}
		api.ServeHTTP(w, req)
	}))
	cell := region.New(r.Store, cli, cli, region.Config{
		Region: r.Name, ID: r.Name + "-server", API: s.HTTP.URL, Pools: r.Pools,
		SessionTTL: TTL, Heartbeat: Heartbeat, PublishInterval: Publish, MaxSleep: 200 * time.Millisecond,
		Logger:    log,
		LivePrice: func(pool string) (float64, bool) { return view.PriceOverride(r.Name, pool) },
	}, region.NewMetrics(reg))
	var shares budget.Shares
	if r.f.cfg.shares {
		shares = budget.EtcdShares{Client: cli}
	}
	node, err := federation.NewNode(federation.Config{
		Region: r.Name, Regions: Regions, ClusterToken: TokCluster, Placement: r.f.Placement, Logger: log,
		NoCapacityRetry: 300 * time.Millisecond, SaturatedRetryAfter: 2 * time.Second, StuckPoolGrace: r.f.cfg.stuck,
		HandOffHorizon: r.f.cfg.horizon,
		Backlog:        func(tenant string) int { return r.f.cfg.backlog[r.Name+"/"+tenant] },
		Budgets:        r.f.cfg.budgets,
		BudgetShares:   shares, SharesPrefix: "/ax/budgets/",
	}, r.Store, view, cell, metrics.New(reg))
	if err != nil {
		s.HTTP.Close()
		view.Close()
		t.Fatal(err)
	}
	s.Node, s.Cell = node, cell
	s.Serve(r.f.api(s))
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		_ = cell.Run(ctx, node, node.OutboxLoop, node.HeldLoop, node.StuckPoolLoop, node.SharesLoop)
	}()
	r.srv = s
}

// Stop kills the region's server: its cell stops (resigns, its registration
// goes), its HTTP server closes. The region's Redis keeps running.
func (r *Region) Stop() {
	r.mu.Lock()
	s := r.srv
	r.srv = nil
	r.mu.Unlock()
	if s == nil {
		return
	}
	s.cancel()
	<-s.done
	s.HTTP.CloseClientConnections()
	s.HTTP.Close()
	s.View.Close()
	s.Node.Close()
}

// Crash kills the region's server as a crash would: its etcd client goes
// first, so nothing is resigned or deleted (the registration lives until its
// lease expires, its figures turn stale), and its HTTP server closes. The
// cell, cut off from etcd, winds down through its call timeouts in the
// background; the harness waits for it at cleanup.
func (r *Region) Crash() {
	r.mu.Lock()
	s := r.srv
	r.srv = nil
	r.mu.Unlock()
	if s == nil {
		return
	}
	_ = s.Cli.Close()
	s.HTTP.CloseClientConnections()
	s.HTTP.Close()
	s.cancel()
	r.f.zombies.Add(1)
	go func() {
		defer r.f.zombies.Done()
		<-s.done
		s.View.Close()
		s.Node.Close()
	}()
}

// Server returns the running server (fails the test when it is stopped).
func (r *Region) Server() *Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv == nil {
		r.f.T.Fatalf("%s is not running", r.Name)
	}
	return r.srv
}

// URL is the region's API base URL.
func (r *Region) URL() string { return r.Server().HTTP.URL }

// Node is the region's federation node.
func (r *Region) Node() *federation.Node { return r.Server().Node }

// Worker keeps a worker of pool alive with slots (heartbeats from a
// goroutine the test owns) until the returned stop, or the test's end.
func (f *Fed) Worker(regionName, pool string, slots int) (stop func()) {
	st := f.regions[regionName].Store
	id := fmt.Sprintf("w-%s-%s-%d", regionName, pool, time.Now().UnixNano())
	beat := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = st.Claimer().Heartbeat(ctx, id, pool, slots, queue.Types{}, nil)
	}
	beat()
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(WorkerBeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				beat()
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-exited }) }
	f.T.Cleanup(stop)
	return stop
}

// WaitReady waits until every running server sees every running region
// healthy, with its workers' slots published.
func (f *Fed) WaitReady() {
	f.T.Helper()
	Eventually(f.T, 20*time.Second, "every server sees every region with its slots", func() bool {
		for _, r := range f.regions {
			if !r.Running() {
				continue
			}
			for _, other := range f.regions {
				if !other.Running() {
					continue
				}
				ri, ok := r.Node().View().Region(other.Name)
				if !ok || !ri.Healthy {
					return false
				}
				for _, p := range ri.Pools {
					if p.Slots != f.cfg.slots[other.Name+"/"+p.Name] {
						return false
					}
				}
			}
		}
		return true
	})
}

func (r *Region) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv != nil
}

// Call sends one request and checks the error shape of every non-2xx
// answer. body is sent as is when it is []byte or string, else as JSON;
// nil sends no body. token "" sends no Authorization.
func (f *Fed) Call(method, url, token string, body any) Reply {
	f.T.Helper()
	rep := Call(f.T, f.HTTP, method, url, token, body)
	// /readyz answers 503 with its own report (ready, problems), for probes.
	if rep.Status >= 400 && !strings.HasSuffix(url, "/readyz") {
		CheckErrorShape(f.T, method+" "+url, rep)
	}
	return rep
}

// Submit posts one spec to a region's server.
func (f *Fed) Submit(regionName, token string, spec any) Reply {
	f.T.Helper()
	return f.Call(http.MethodPost, f.R(regionName).URL()+"/v1/tasks", token, spec)
}

// SubmitOK submits and expects 201.
func (f *Fed) SubmitOK(regionName, token string, spec any) apiv1.SubmitResponse {
	f.T.Helper()
	var sr apiv1.SubmitResponse
	f.Submit(regionName, token, spec).Want(f.T, http.StatusCreated).JSON(f.T, &sr)
	return sr
}

// Explain is a dry-run placement on a region's server.
func (f *Fed) Explain(regionName string, spec any) apiv1.Explanation {
	f.T.Helper()
	var ex apiv1.Explanation
	// A token of every tenant: a tenant's sees no run counts (docs/security.md).
	f.Call(http.MethodPost, f.R(regionName).URL()+"/v1/placement/explain", TokOperator, spec).Want(f.T, http.StatusOK).JSON(f.T, &ex)
	return ex
}

// GetTask reads a task through a region's server.
func (f *Fed) GetTask(regionName, token, id string) (task.Task, Reply) {
	f.T.Helper()
	rep := f.Call(http.MethodGet, f.R(regionName).URL()+"/v1/tasks/"+id, token, nil)
	var tk task.Task
	if rep.Status == http.StatusOK {
		rep.JSON(f.T, &tk)
	}
	return tk, rep
}

// Trail reads a task's trail through a region's server.
func (f *Fed) Trail(regionName, token, id string) []task.Transition {
	f.T.Helper()
	var tr apiv1.TrailResponse
	f.Call(http.MethodGet, f.R(regionName).URL()+"/v1/tasks/"+id+"/trail", token, nil).Want(f.T, http.StatusOK).JSON(f.T, &tr)
	return tr.Transitions
}

func HasReason(tr []task.Transition, reason string) bool {
	for _, x := range tr {
		if x.Reason == reason {
			return true
		}
	}
	return false
}

// Where lists, for one id, the regions whose store holds a live record
// (anything but a HANDED_OFF forwarding record).
func (f *Fed) Where(ctx context.Context, id string) []string {
	f.T.Helper()
	var out []string
	for _, name := range Regions {
		tk, err := f.R(name).Store.Get(ctx, id)
		if err != nil {
			continue
		}
		if tk.State != task.HandedOff {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// OutboxEmpty reports whether no region has a hand-off in flight, due now
// or later: none in an outbox, and none held by its receiver for the
// sender's word (a held task is PENDING there, not yet READY: the sender
// records the hand-off first and tells the receiver after).
func (f *Fed) OutboxEmpty(ctx context.Context) bool {
	for _, r := range f.regions {
		ts, err := r.Later.HandOffs().Outbox(ctx, 1)
		if err != nil || len(ts) > 0 {
			return false
		}
		held, err := r.Later.HandOffs().Held(ctx, time.Now().Add(time.Hour), 1)
		if err != nil || len(held) > 0 {
			return false
		}
	}
	return true
}

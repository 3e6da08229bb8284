package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

// Every goroutine a test starts (servers, cells, views, workers, outbox
// senders, HTTP connections) must be gone when the package's tests end.
func TestMain(m *testing.M) {
	// go-redis logs every failed dial to stderr; tests kill Redis on purpose.
	redis.SetLogger(quietRedis{})
	goleak.VerifyTestMain(m)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// The three regions of the harness, on three clouds.
const (
	aws = "aws-use1"  // AWS us-east-1
	gcp = "gcp-euw4"  // GCP europe-west4
	az  = "az-eastus" // Azure eastus
)

var regionNames = []string{aws, gcp, az}

// Pool names; the same three in every region (a pool is region/name).
const (
	poolCPU  = "cpu"      // on-demand CPU, one slot per vCPU
	poolSpot = "cpu-spot" // spot CPU, one slot per vCPU
	poolGPU  = "gpu"      // one slot per GPU
)

// Timings of the harness, short so the whole package runs in well under
// 90 s with -race: the etcd session TTL (etcd's minimum with the embedded
// server's election timeout), stale_after, the view's health grace period,
// how often leaders publish figures, and the workers' heartbeat.
const (
	testTTL       = 2 * time.Second
	testStale     = 3 * time.Second
	testGrace     = time.Second
	testPublish   = 250 * time.Millisecond
	testHeartbeat = 500 * time.Millisecond
	// workerBeat is how often a test's worker heartbeats (the cell forgets a
	// worker after 3 × testHeartbeat + 1 s of silence).
	workerBeat = 300 * time.Millisecond
)

// Tokens of the harness's auth config.
const (
	tokAcme       = "tok-acme-submitter"    // submitter, tenant acme
	tokGlobex     = "tok-globex-submitter"  // submitter, tenant globex
	tokGlobexOps  = "tok-globex-operator"   // operator, tenant globex only
	tokOperator   = "tok-operator"          // operator, every tenant
	tokAdmin      = "tok-admin"             // admin, every tenant
	tokCluster    = "tok-cluster-secret-42" // server to server
	tokUnknown    = "tok-nobody"
	defaultQueCap = 1000
)

// poolSpec is one configured pool; price per slot-hour from
// /work/shared/data/prices.csv (see pricedPools).
type poolSpec struct {
	name  string
	tags  map[string]string
	price float64
	spot  bool
}

// pricedPools are the harness's pools, priced from
// /work/shared/data/prices.csv (on-demand and spot columns). CPU pools have
// one slot per vCPU, so price per slot-hour = VM price ÷ vCPUs; GPU pools
// one slot per GPU (every VM used has one GPU).
//
//	cheapest spot CPU:      az 0.00528 < gcp 0.0177175 < aws 0.02215
//	cheapest on-demand CPU: aws 0.048 = az 0.048 < gcp 0.0534575 (tie → region name)
//	a100:                   gcp 2.42771 < az 3.673;  l4: aws only
var pricedPools = map[string][]poolSpec{
	aws: {
		// aws,us-east-1,m6i.xlarge,4 vCPU: 0.192 on-demand, 0.088600 spot.
		{name: poolCPU, tags: map[string]string{"arch": "x86", "class": "on-demand"}, price: 0.192 / 4},
		{name: poolSpot, tags: map[string]string{"arch": "x86", "class": "spot"}, price: 0.0886 / 4, spot: true},
		// aws,us-east-1,g6.xlarge,1 × L4: 0.8048 on-demand.
		{name: poolGPU, tags: map[string]string{"gpu": "l4"}, price: 0.8048},
	},
	gcp: {
		// gcp,europe-west4,n2-standard-4,4 vCPU: 0.21383 on-demand, 0.07087 spot.
		{name: poolCPU, tags: map[string]string{"arch": "x86", "class": "on-demand"}, price: 0.21383 / 4},
		{name: poolSpot, tags: map[string]string{"arch": "x86", "class": "spot"}, price: 0.07087 / 4, spot: true},
		// gcp,europe-west4,a2-highgpu-1g: 0.81406 for the VM plus 1.61365 for its
		// one A100 (GCP bills the GPU on its own row).
		{name: poolGPU, tags: map[string]string{"gpu": "a100"}, price: 0.81406 + 1.61365},
	},
	az: {
		// azure,eastus,Standard_D4s_v5,4 vCPU: 0.192 on-demand, 0.02112 spot.
		{name: poolCPU, tags: map[string]string{"arch": "x86", "class": "on-demand"}, price: 0.192 / 4},
		{name: poolSpot, tags: map[string]string{"arch": "x86", "class": "spot"}, price: 0.02112 / 4, spot: true},
		// azure,eastus,Standard_NC24ads_A100_v4,1 × A100-80GB: 3.673 on-demand.
		{name: poolGPU, tags: map[string]string{"gpu": "a100"}, price: 3.673},
	},
}

func priceOf(regionName, pool string) float64 {
	for _, p := range pricedPools[regionName] {
		if p.name == pool {
			return p.price
		}
	}
	panic("no pool " + regionName + "/" + pool)
}

// fedConfig tunes a harness.
type fedConfig struct {
	capacity map[string]int // "region/pool" → queue capacity (default defaultQueCap)
	slots    map[string]int // "region/pool" → slots of the worker the harness registers (0: none)
	soft     float64
	hard     float64
	stuck    time.Duration // re-placement grace of pools without workers (0: the default)
}

type fedOption func(*fedConfig)

// withCapacity sets one pool's queue capacity.
func withCapacity(regionName, pool string, n int) fedOption {
	return func(c *fedConfig) { c.capacity[regionName+"/"+pool] = n }
}

// withSlots sets the slots of the worker registered for one pool (0: no
// worker).
func withSlots(regionName, pool string, n int) fedOption {
	return func(c *fedConfig) { c.slots[regionName+"/"+pool] = n }
}

// withoutGPUWorkers registers no worker for any GPU pool.
func withoutGPUWorkers() fedOption {
	return func(c *fedConfig) {
		for _, r := range regionNames {
			c.slots[r+"/"+poolGPU] = 0
		}
	}
}

// fed is three regions on one embedded etcd and three redis-servers, each
// region with one server (store → view → node → API → cell), assembled as
// cmd/ax/runtime.go does.
type fed struct {
	t       *testing.T
	cfg     fedConfig
	etcd    *testenv.Etcd
	etcdCli *clientv3.Client // the test's own client (price overrides)
	pcfg    placement.Config
	auth    *Auth
	log     *slog.Logger
	regions map[string]*regionEnv
	http    *http.Client
	zombies sync.WaitGroup // crashed servers still winding down
}

// regionEnv is one region: its Redis and store outlive its server, which
// tests kill and restart.
type regionEnv struct {
	f     *fed
	name  string
	redis *testenv.Redis
	store *queue.Store
	// later reads the same Redis an hour ahead: its Outbox lists every
	// hand-off in flight, not only those due now. Read-only use.
	later *queue.Store
	pools []region.Pool

	// intercept, when set, sees every request to the region's server first
	// and decides what reaches the API (next).
	intercept atomic.Pointer[func(w http.ResponseWriter, r *http.Request, next http.Handler)]

	mu  sync.Mutex
	srv *server
}

// server is one running ax server of a region.
type server struct {
	cli    *clientv3.Client
	view   *View
	node   *Node
	cell   *region.Cell
	apiCfg APIConfig
	api    atomic.Pointer[API] // replaced by serveSchedules
	http   *httptest.Server
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

func newFed(t *testing.T, opts ...fedOption) *fed {
	t.Helper()
	cfg := fedConfig{capacity: map[string]int{}, slots: map[string]int{}, soft: 0.6, hard: 0.8}
	for _, r := range regionNames {
		cfg.slots[r+"/"+poolCPU] = 4
		cfg.slots[r+"/"+poolSpot] = 4
		cfg.slots[r+"/"+poolGPU] = 1
	}
	for _, o := range opts {
		o(&cfg)
	}
	f := &fed{t: t, cfg: cfg, regions: map[string]*regionEnv{}, http: &http.Client{Timeout: 30 * time.Second}}
	f.log = slog.New(slog.DiscardHandler)
	if os.Getenv("AX_TEST_LOG") != "" {
		f.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	f.pcfg = placement.DefaultConfig()
	f.pcfg.StaleAfter = testStale
	// DESIGN §5: ≥ 60 % the penalty starts, ≥ 80 % non-critical work goes
	// elsewhere or gets 429.
	f.pcfg.SoftWatermark, f.pcfg.HardWatermark = cfg.soft, cfg.hard
	f.auth = &Auth{Enabled: true, ClusterToken: tokCluster, Tokens: []Token{
		{Name: "acme-ci", SHA256: HashToken(tokAcme), Role: RoleSubmitter, Tenant: "acme"},
		{Name: "globex-ci", SHA256: HashToken(tokGlobex), Role: RoleSubmitter, Tenant: "globex"},
		{Name: "globex-ops", SHA256: HashToken(tokGlobexOps), Role: RoleOperator, Tenant: "globex"},
		{Name: "oncall", SHA256: HashToken(tokOperator), Role: RoleOperator},
		{Name: "root", SHA256: strings.ToUpper(HashToken(tokAdmin)), Role: RoleAdmin},
	}}
	f.etcd = testenv.StartEtcd(t)
	f.etcdCli = f.etcd.Client()
	t.Cleanup(f.http.CloseIdleConnections)
	for _, name := range regionNames {
		r := &regionEnv{f: f, name: name, redis: testenv.StartRedis(t)}
		st, err := queue.New(r.redis.Client(), queue.Options{Region: name})
		if err != nil {
			t.Fatal(err)
		}
		r.store = st
		if r.later, err = queue.New(r.redis.Client(), queue.Options{Region: name,
			Now: func() time.Time { return time.Now().Add(time.Hour) }}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pricedPools[name] {
			qc := defaultQueCap
			if c, ok := cfg.capacity[name+"/"+p.name]; ok {
				qc = c
			}
			r.pools = append(r.pools, region.Pool{Name: p.name, Tags: p.tags, QueueCapacity: qc,
				PricePerSlotHour: p.price, Spot: p.spot})
		}
		f.regions[name] = r
	}
	// Servers stop before their Redis and etcd (cleanups run last-in first).
	t.Cleanup(func() {
		for _, r := range f.regions {
			r.stop()
		}
		f.zombies.Wait()
	})
	for _, name := range regionNames {
		f.regions[name].start()
	}
	for _, name := range regionNames {
		for _, p := range pricedPools[name] {
			if n := cfg.slots[name+"/"+p.name]; n > 0 {
				f.worker(name, p.name, n)
			}
		}
	}
	f.waitReady()
	return f
}

// r returns a region.
func (f *fed) r(name string) *regionEnv { return f.regions[name] }

// start assembles and runs the region's server as cmd/ax/runtime.go does.
func (r *regionEnv) start() {
	t := r.f.t
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		t.Fatalf("%s already running", r.name)
	}
	cli := r.f.etcd.Client()
	reg := prometheus.NewRegistry()
	log := r.f.log.With("server", r.name)
	view := NewView(cli, "/ax/", r.f.pcfg, testGrace, log)
	node, err := NewNode(Config{
		Region: r.name, Regions: regionNames, ClusterToken: tokCluster, Placement: r.f.pcfg, Logger: log,
		NoCapacityRetry: 300 * time.Millisecond, SaturatedRetryAfter: 2 * time.Second, StuckPoolGrace: r.f.cfg.stuck,
	}, r.store, view, NewMetrics(reg))
	if err != nil {
		view.Close()
		t.Fatal(err)
	}
	var names []string
	for _, p := range r.pools {
		names = append(names, p.Name)
	}
	apiCfg := APIConfig{Auth: r.f.auth, Gatherer: reg, Pools: names,
		Ready: func(ctx context.Context) error {
			_, err := cli.Get(clientv3.WithRequireLeader(ctx), "/ax/ready-probe")
			return err
		}}
	s := &server{cli: cli, view: view, node: node, apiCfg: apiCfg, reg: reg, done: make(chan struct{})}
	s.api.Store(NewAPI(node, apiCfg))
	s.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		api := s.api.Load()
		if f := r.intercept.Load(); f != nil {
			(*f)(w, req, api)
			return
		}
		api.ServeHTTP(w, req)
	}))
	cell := region.New(r.store, cli, cli, region.Config{
		Region: r.name, ID: r.name + "-server", API: s.http.URL, Pools: r.pools,
		SessionTTL: testTTL, Heartbeat: testHeartbeat, PublishInterval: testPublish, MaxSleep: 200 * time.Millisecond,
		Logger:      log,
		LeaderLoops: []func(context.Context, queue.Fence, func(error)){node.OutboxLoop, node.StuckPoolLoop},
		LivePrice:   func(pool string) (float64, bool) { return view.PriceOverride(r.name, pool) },
	}, node, region.NewMetrics(reg))
	node.SetCell(cell)
	ctx, cancel := context.WithCancel(context.Background())
	s.cell, s.cancel = cell, cancel
	go func() {
		defer close(s.done)
		_ = cell.Run(ctx)
	}()
	r.srv = s
}

// serveSchedules makes the region's server serve the schedule endpoints
// through sc from now on, as a server started with it would.
func (r *regionEnv) serveSchedules(sc Schedules) {
	s := r.server()
	cfg := s.apiCfg
	cfg.Schedules = sc
	s.api.Store(NewAPI(s.node, cfg))
}

// stop kills the region's server: its cell stops (resigns, its registration
// goes), its HTTP server closes. The region's Redis keeps running.
func (r *regionEnv) stop() {
	r.mu.Lock()
	s := r.srv
	r.srv = nil
	r.mu.Unlock()
	if s == nil {
		return
	}
	s.cancel()
	<-s.done
	s.http.CloseClientConnections()
	s.http.Close()
	s.view.Close()
	s.node.peers.CloseIdleConnections()
}

// crash kills the region's server as a crash would: its etcd client goes
// first, so nothing is resigned or deleted (the registration lives until its
// lease expires, its figures turn stale), and its HTTP server closes. The
// cell, cut off from etcd, winds down through its call timeouts in the
// background; the harness waits for it at cleanup.
func (r *regionEnv) crash() {
	r.mu.Lock()
	s := r.srv
	r.srv = nil
	r.mu.Unlock()
	if s == nil {
		return
	}
	_ = s.cli.Close()
	s.http.CloseClientConnections()
	s.http.Close()
	s.cancel()
	r.f.zombies.Add(1)
	go func() {
		defer r.f.zombies.Done()
		<-s.done
		s.view.Close()
		s.node.peers.CloseIdleConnections()
	}()
}

// server returns the running server (fails the test when it is stopped).
func (r *regionEnv) server() *server {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv == nil {
		r.f.t.Fatalf("%s is not running", r.name)
	}
	return r.srv
}

// url is the region's API base URL.
func (r *regionEnv) url() string { return r.server().http.URL }

// node is the region's federation node.
func (r *regionEnv) node() *Node { return r.server().node }

// worker keeps a worker of pool alive with slots (heartbeats from a
// goroutine the test owns) until the returned stop, or the test's end.
func (f *fed) worker(regionName, pool string, slots int) (stop func()) {
	st := f.regions[regionName].store
	id := fmt.Sprintf("w-%s-%s-%d", regionName, pool, time.Now().UnixNano())
	beat := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = st.Heartbeat(ctx, id, pool, slots, nil)
	}
	beat()
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(workerBeat)
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
	f.t.Cleanup(stop)
	return stop
}

// waitReady waits until every running server sees every running region
// healthy, with its workers' slots published.
func (f *fed) waitReady() {
	f.t.Helper()
	eventually(f.t, 20*time.Second, "every server sees every region with its slots", func() bool {
		for _, r := range f.regions {
			if !r.running() {
				continue
			}
			for _, other := range f.regions {
				if !other.running() {
					continue
				}
				ri, ok := r.node().View().Region(other.name)
				if !ok || !ri.Healthy {
					return false
				}
				for _, p := range ri.Pools {
					if p.Slots != f.cfg.slots[other.name+"/"+p.Name] {
						return false
					}
				}
			}
		}
		return true
	})
}

func (r *regionEnv) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv != nil
}

// eventually polls cond every 20 ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ---------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------

// reply is one HTTP answer.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// call sends one request and checks the error shape of every non-2xx
// answer. body is sent as is when it is []byte or string, else as JSON;
// nil sends no body. token "" sends no Authorization.
func (f *fed) call(method, url, token string, body any) reply {
	f.t.Helper()
	rep := httpCall(f.t, f.http, method, url, token, body)
	// /readyz answers 503 with its own report (ready, problems), for probes.
	if rep.Status >= 400 && !strings.HasSuffix(url, "/readyz") {
		checkErrorShape(f.t, method+" "+url, rep)
	}
	return rep
}

// httpCall sends one request with c (see fed.call for body and token).
func httpCall(t testing.TB, c *http.Client, method, url, token string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// checkErrorShape: every error is {"error":{"code","message"[,"field"]}}.
func checkErrorShape(t testing.TB, what string, rep reply) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(rep.Body, &raw); err != nil {
		t.Fatalf("%s: %d with a body that is not a JSON object: %q", what, rep.Status, rep.Body)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(raw["error"], &inner); err != nil || len(raw) != 1 {
		t.Fatalf("%s: %d: body is not {\"error\":{...}}: %s", what, rep.Status, rep.Body)
	}
	var e apiv1.Error
	_ = json.Unmarshal(raw["error"], &e)
	if e.Code == "" || e.Message == "" {
		t.Fatalf("%s: %d: error without code or message: %s", what, rep.Status, rep.Body)
	}
	if ct := rep.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: %d: Content-Type %q", what, rep.Status, ct)
	}
}

// json decodes the body into v.
func (rep reply) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(rep.Body, v); err != nil {
		t.Fatalf("decode %q: %v", rep.Body, err)
	}
}

// err is the error of a non-2xx answer.
func (rep reply) err(t testing.TB) apiv1.Error {
	t.Helper()
	var eb apiv1.ErrorBody
	rep.json(t, &eb)
	if eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("not an error body: %s", rep.Body)
	}
	return eb.Error
}

// want fails unless the status is status.
func (rep reply) want(t testing.TB, status int) reply {
	t.Helper()
	if rep.Status != status {
		t.Fatalf("status %d, want %d: %s", rep.Status, status, rep.Body)
	}
	return rep
}

// submit posts one spec to a region's server.
func (f *fed) submit(regionName, token string, spec any) reply {
	f.t.Helper()
	return f.call(http.MethodPost, f.r(regionName).url()+"/v1/tasks", token, spec)
}

// submitOK submits and expects 201.
func (f *fed) submitOK(regionName, token string, spec any) apiv1.SubmitResponse {
	f.t.Helper()
	var sr apiv1.SubmitResponse
	f.submit(regionName, token, spec).want(f.t, http.StatusCreated).json(f.t, &sr)
	return sr
}

// explain is a dry-run placement on a region's server.
func (f *fed) explain(regionName string, spec any) apiv1.Explanation {
	f.t.Helper()
	var ex apiv1.Explanation
	f.call(http.MethodPost, f.r(regionName).url()+"/v1/placement/explain", tokAcme, spec).want(f.t, http.StatusOK).json(f.t, &ex)
	return ex
}

// getTask reads a task through a region's server.
func (f *fed) getTask(regionName, token, id string) (task.Task, reply) {
	f.t.Helper()
	rep := f.call(http.MethodGet, f.r(regionName).url()+"/v1/tasks/"+id, token, nil)
	var tk task.Task
	if rep.Status == http.StatusOK {
		rep.json(f.t, &tk)
	}
	return tk, rep
}

// trail reads a task's trail through a region's server.
func (f *fed) trail(regionName, token, id string) []task.Transition {
	f.t.Helper()
	var tr apiv1.TrailResponse
	f.call(http.MethodGet, f.r(regionName).url()+"/v1/tasks/"+id+"/trail", token, nil).want(f.t, http.StatusOK).json(f.t, &tr)
	return tr.Transitions
}

func hasReason(tr []task.Transition, reason string) bool {
	for _, x := range tr {
		if x.Reason == reason {
			return true
		}
	}
	return false
}

// where lists, for one id, the regions whose store holds a live record
// (anything but a HANDED_OFF forwarding record).
func (f *fed) where(ctx context.Context, id string) []string {
	f.t.Helper()
	var out []string
	for _, name := range regionNames {
		tk, err := f.r(name).store.Get(ctx, id)
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

// outboxEmpty reports whether no region has a hand-off in flight, due now
// or later.
func (f *fed) outboxEmpty(ctx context.Context) bool {
	for _, r := range f.regions {
		ts, err := r.later.Outbox(ctx, 1)
		if err != nil || len(ts) > 0 {
			return false
		}
	}
	return true
}

// spec is a small task spec as JSON.
type spec = map[string]any

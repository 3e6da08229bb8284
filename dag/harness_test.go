package dag

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The DAG tests' own small federation: three regions on one embedded etcd
// and three redis-servers, one "cpu" pool each, and any number of servers
// per region (assembled as cmd/ax/runtime.go does, with the DAG reconciler
// among the leader loops), so a region's leader can be killed while a
// standby takes over.

var dagRegions = []string{"us-east-1", "eu-west-1", "ap-south-1"}

const (
	dagPool       = "cpu"
	dagTokAcme    = "dag-tok-acme"
	dagTokGlobex  = "dag-tok-globex"
	dagTokAdmin   = "dag-tok-admin"
	dagTokAcmeOps = "dag-tok-acme-ops" // operator, tenant acme
	dagTokCluster = "dag-tok-cluster"
)

// dagEnv is the federation of a DAG test.
type dagEnv struct {
	t       *testing.T
	etcd    *testenv.Etcd
	auth    *httpapi.Auth
	pcfg    placement.Config
	log     *slog.Logger
	http    *http.Client
	regions map[string]*dagRegion
	zombies sync.WaitGroup // crashed servers winding down
}

// dagRegion is one region: its Redis and store outlive its servers.
type dagRegion struct {
	e     *dagEnv
	name  string
	redis *testenv.Redis
	store *store.Store
	pools []region.Pool

	mu      sync.Mutex
	servers []*dagServer
	ever    []*dagServer // every server started, running or not (counter)
	started int
}

// dagServer is one ax server of a region.
type dagServer struct {
	id     string
	cli    *clientv3.Client
	view   *view.View
	node   *federation.Node
	runs   *Runs
	cell   *region.Cell
	http   *httptest.Server
	cancel context.CancelFunc
	done   chan struct{}
}

// newDAGEnv starts the federation with servers[r] servers in region r
// (default one).
func newDAGEnv(t *testing.T, servers map[string]int) *dagEnv {
	t.Helper()
	e := &dagEnv{t: t, regions: map[string]*dagRegion{}, http: &http.Client{Timeout: 20 * time.Second}}
	e.log = slog.New(slog.DiscardHandler)
	if os.Getenv("AX_TEST_LOG") != "" {
		e.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	e.pcfg = placement.DefaultConfig()
	e.pcfg.StaleAfter = 3 * time.Second
	e.auth = &httpapi.Auth{Enabled: true, ClusterToken: dagTokCluster, Tokens: []httpapi.Token{
		{Name: "acme", SHA256: httpapi.HashToken(dagTokAcme), Role: httpapi.RoleSubmitter, Tenant: "acme"},
		{Name: "globex", SHA256: httpapi.HashToken(dagTokGlobex), Role: httpapi.RoleSubmitter, Tenant: "globex"},
		{Name: "root", SHA256: httpapi.HashToken(dagTokAdmin), Role: httpapi.RoleAdmin},
		{Name: "acme-ops", SHA256: httpapi.HashToken(dagTokAcmeOps), Role: httpapi.RoleOperator, Tenant: "acme"},
	}}
	e.etcd = testenv.StartEtcd(t)
	t.Cleanup(e.http.CloseIdleConnections)
	for i, name := range dagRegions {
		r := &dagRegion{e: e, name: name, redis: testenv.StartRedis(t)}
		st, err := store.New(r.redis.Client(), queue.Options{Region: name})
		if err != nil {
			t.Fatal(err)
		}
		r.store = st
		r.pools = []region.Pool{{Name: dagPool, Tags: map[string]string{"arch": "x86"}, QueueCapacity: 1000,
			PricePerSlotHour: 0.04 + 0.01*float64(i)}}
		e.regions[name] = r
	}
	// Servers stop before Redis and etcd (cleanups run last-in first).
	t.Cleanup(func() {
		for _, r := range e.regions {
			r.stopAll()
		}
		e.zombies.Wait()
	})
	for _, name := range dagRegions {
		for k := 0; k < max(servers[name], 1); k++ {
			e.regions[name].start()
		}
	}
	return e
}

func (e *dagEnv) r(name string) *dagRegion { return e.regions[name] }

// start assembles and runs one more server of the region.
func (r *dagRegion) start() *dagServer {
	e := r.e
	e.t.Helper()
	r.mu.Lock()
	r.started++
	id := fmt.Sprintf("%s-server-%d", r.name, r.started)
	r.mu.Unlock()
	cli := e.etcd.Client()
	reg := prometheus.NewRegistry()
	log := e.log.With("server", id)
	view := view.New(cli, "/ax/", e.pcfg, time.Second, log)
	// The HTTP server first (the cell publishes its address), serving the
	// API built below.
	var api atomic.Pointer[httpapi.API]
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { api.Load().ServeHTTP(w, req) }))
	cell := region.New(r.store, cli, cli, region.Config{
		Region: r.name, ID: id, API: hs.URL, Pools: r.pools,
		SessionTTL: 2 * time.Second, Heartbeat: 500 * time.Millisecond, PublishInterval: 250 * time.Millisecond,
		MaxSleep: 200 * time.Millisecond, Logger: log,
	}, region.NewMetrics(reg))
	node, err := federation.NewNode(federation.Config{
		Region: r.name, Regions: dagRegions, ClusterToken: dagTokCluster, Placement: e.pcfg, Logger: log,
		NoCapacityRetry: 300 * time.Millisecond, SaturatedRetryAfter: 2 * time.Second,
	}, r.store, view, cell, metrics.New(reg))
	if err != nil {
		hs.Close()
		view.Close()
		e.t.Fatal(err)
	}
	runs := New(r.store.DAGs(), node, Config{Region: r.name, Regions: dagRegions, Registerer: reg, Logger: log})
	api.Store(httpapi.New(node, httpapi.Config{Auth: e.auth, Gatherer: reg, Pools: []string{dagPool}, DAGs: runs}))
	ctx, cancel := context.WithCancel(context.Background())
	s := &dagServer{id: id, cli: cli, view: view, node: node, runs: runs, cell: cell, http: hs, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = cell.Run(ctx, node, node.OutboxLoop, runs.Loop)
	}()
	r.mu.Lock()
	r.servers = append(r.servers, s)
	r.ever = append(r.ever, s)
	r.mu.Unlock()
	return s
}

// counter is the sum over every server the region ever ran (each counts
// what it did while it led) of the DAG counter name with the region's and
// these labels.
func (r *dagRegion) counter(name string, labels ...string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := 0.0
	for _, s := range r.ever {
		c := s.runs.metrics.released
		if name == "ax_dag_runs_total" {
			c = s.runs.metrics.runs
		}
		sum += counterValue(c.WithLabelValues(append([]string{r.name}, labels...)...))
	}
	return sum
}

func (s *dagServer) stop() {
	s.cancel()
	<-s.done
	s.http.CloseClientConnections()
	s.http.Close()
	s.view.Close()
	s.node.Close()
}

func (r *dagRegion) stopAll() {
	r.mu.Lock()
	ss := r.servers
	r.servers = nil
	r.mu.Unlock()
	for _, s := range ss {
		s.stop()
	}
}

// leader is the server leading the region now (nil when none does).
func (r *dagRegion) leader() *dagServer {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.servers {
		if s.cell.Leading() {
			return s
		}
	}
	return nil
}

// any is a running server of the region.
func (r *dagRegion) any() *dagServer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.servers) == 0 {
		r.e.t.Fatalf("%s has no server", r.name)
	}
	return r.servers[0]
}

// crash kills a server as a crash would: its etcd client goes first, so it
// resigns nothing (its election key lives until the lease expires, and a
// standby waits that long), then its loops stop and its HTTP server closes.
// The test waits for its goroutines at cleanup.
func (r *dagRegion) crash(s *dagServer) {
	r.mu.Lock()
	for i, x := range r.servers {
		if x == s {
			r.servers = append(r.servers[:i:i], r.servers[i+1:]...)
		}
	}
	r.mu.Unlock()
	_ = s.cli.Close()
	s.cancel()
	s.http.CloseClientConnections()
	s.http.Close()
	r.e.zombies.Add(1)
	go func() {
		defer r.e.zombies.Done()
		<-s.done
		s.view.Close()
		s.node.Close()
	}()
}

// waitReady waits until every server sees every region healthy with slots.
func (e *dagEnv) waitReady() {
	e.t.Helper()
	fedtest.Eventually(e.t, 20*time.Second, "every server sees every region with live slots", func() bool {
		for _, r := range e.regions {
			r.mu.Lock()
			ss := append([]*dagServer(nil), r.servers...)
			r.mu.Unlock()
			for _, s := range ss {
				for _, name := range dagRegions {
					ri, ok := s.view.Region(name)
					if !ok || !ri.Healthy || len(ri.Pools) == 0 || ri.Pools[0].Slots == 0 {
						return false
					}
				}
			}
		}
		return true
	})
}

// dagWorkers claim and settle tasks in every region's cpu pool from test
// goroutines, recording when each task started and ended on one counter,
// so "ran after" is a plain comparison.
type dagWorkers struct {
	e     *dagEnv
	clock atomic.Int64
	delay time.Duration // how long each task "runs"

	mu   sync.Mutex
	runs map[string][]dagRunRec // by task id

	stop func()
}

type dagRunRec struct {
	Region     string
	Type       string
	Start, End int64
	Parents    task.ParentResults // what the task carried of its parents
}

// startWorkers runs one worker per region until the test ends. Tasks of
// type "fail" fail without retry; every other task succeeds with the
// result "<id> in <region>" (a task of type "bytes": 3 bytes that are not
// UTF-8).
func (e *dagEnv) startWorkers(delay time.Duration) *dagWorkers {
	w := &dagWorkers{e: e, delay: delay, runs: map[string][]dagRunRec{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range dagRegions {
		st := e.r(name).store
		id := "w-" + name
		beat := func() {
			cctx, cc := context.WithTimeout(ctx, 2*time.Second)
			defer cc()
			_, _ = st.Claimer().Heartbeat(cctx, id, dagPool, 16, queue.Types{}, nil)
		}
		beat()
		wg.Add(2)
		go func() {
			defer wg.Done()
			t := time.NewTicker(300 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					beat()
				}
			}
		}()
		go func() {
			defer wg.Done()
			w.claimLoop(ctx, name, st, id, &wg)
		}()
	}
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	e.t.Cleanup(w.stop)
	return w
}

func (w *dagWorkers) claimLoop(ctx context.Context, name string, st *store.Store, id string, wg *sync.WaitGroup) {
	for ctx.Err() == nil {
		ts, err := st.Claimer().Claim(ctx, queue.ClaimRequest{Pool: dagPool, Worker: id, N: 16})
		if err != nil || len(ts) == 0 {
			_, _ = st.Claimer().WaitForWork(ctx, dagPool, 50*time.Millisecond)
			continue
		}
		for _, t := range ts {
			rec := dagRunRec{Region: name, Type: t.Type, Start: w.clock.Add(1), Parents: t.Parents}
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-ctx.Done():
					return
				case <-time.After(w.delay):
				}
				// End is taken before the store records the outcome: nothing
				// downstream can start before the outcome is recorded.
				rec.End = w.clock.Add(1)
				w.mu.Lock()
				w.runs[t.ID] = append(w.runs[t.ID], rec)
				w.mu.Unlock()
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if t.Type == "fail" {
					_, _, _ = st.Claimer().Fail(cctx, queue.Failure{ID: t.ID, Token: t.LeaseToken, Error: "boom", Retryable: false})
					return
				}
				result := t.ID + " in " + name
				if t.Type == "bytes" {
					result = "\xff\x00\xfe"
				}
				_, _ = st.Claimer().Complete(cctx, queue.Completion{ID: t.ID, Token: t.LeaseToken, Result: result})
			}()
		}
	}
}

// ran returns the runs of a task.
func (w *dagWorkers) ran(taskID string) []dagRunRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]dagRunRec(nil), w.runs[taskID]...)
}

// call sends one request (see httpCall).
func (e *dagEnv) call(method, url, token string, body any) fedtest.Reply {
	e.t.Helper()
	return fedtest.Call(e.t, e.http, method, url, token, body)
}

// submitDAG posts a DAG to a server.
func (e *dagEnv) submitDAG(s *dagServer, token string, body any) fedtest.Reply {
	e.t.Helper()
	return e.call(http.MethodPost, s.http.URL+"/v1/dags", token, body)
}

// getDAG reads a DAG through a server; it fails the test unless 200.
func (e *dagEnv) getDAG(s *dagServer, token, id string) apiv1.DAGStatus {
	e.t.Helper()
	var st apiv1.DAGStatus
	e.call(http.MethodGet, s.http.URL+"/v1/dags/"+id, token, nil).Want(e.t, http.StatusOK).JSON(e.t, &st)
	return st
}

// waitDAG waits until the run ended and returns it.
func (e *dagEnv) waitDAG(home *dagRegion, id string, within time.Duration) apiv1.DAGStatus {
	e.t.Helper()
	var st apiv1.DAGStatus
	fedtest.Eventually(e.t, within, "DAG "+id+" ends", func() bool {
		rep := e.call(http.MethodGet, home.any().http.URL+"/v1/dags/"+id, dagTokAdmin, nil)
		if rep.Status != http.StatusOK {
			return false
		}
		rep.JSON(e.t, &st)
		return st.State != task.DAGRunning
	})
	return st
}

// node is a node of a DAG request: a task of typ forced into one region.
func dagNode(id, typ, regionName string, deps ...string) map[string]any {
	task := map[string]any{"type": typ, "max_retries": 0}
	if regionName != "" {
		task["regions"] = []string{regionName}
	}
	n := map[string]any{"id": id, "task": task}
	if len(deps) > 0 {
		n["depends_on"] = deps
	}
	return n
}

package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/internal/bench"
	"github.com/ax-sched/ax/internal/redisproc"
	"github.com/ax-sched/ax/internal/tlsconf"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
)

// Options size an `ax bench api` run.
type Options struct {
	Single     int // tasks submitted one per request (default 20 000)
	Conns      int // keep-alive connections submitting one task per request (default 16)
	Batched    int // tasks submitted in batches (default 100 000)
	Batch      int // tasks per POST /v1/tasks/batch (default 1 000)
	BatchConns int // connections submitting batches (default 2)
	Workers    int // `ax worker` processes draining (default 2)
	// Concurrency is each worker's slots (default 128).
	Concurrency int
	// Modes: "local" (one region), "handoff" (two regions, every task
	// submitted to the first and run in the second). Default both. Each
	// with a "-tls" suffix runs with TLS on every hop: the API over https
	// (clients verify it with the run's CA), hand-off over https, servers
	// and workers to Redis over TLS (rediss://, its TLS port only).
	Modes []string
	// Exe is the ax binary started as `ax server` and `ax worker`.
	Exe string
	// Etcd starts an etcd for the run (regional and global) in dir and
	// returns its endpoint and a stop function; cmd/ax passes the embedded
	// one `ax dev` uses.
	Etcd func(dir string) (endpoint string, stop func(), err error)
	// RedisServer is the redis-server binary (default on PATH).
	RedisServer string
	// AOF, when set, gives every region's redis-server the append-only
	// file with this appendfsync policy (everysec: how users run it).
	AOF string
	// SampleEvery: one task in this many has its submit→start measured
	// (default 10).
	SampleEvery int
	// ServerProfile, when set, is a directory: every server serves
	// /debug/pprof/ (http_server.profiling) and each phase writes a CPU
	// profile of each server over its first ProfileFor seconds there, as
	// <mode>-<phase>-<region>.prof.
	ServerProfile string
	// Logs, when set, is a directory each ax process's output is written
	// to (<region>-<process>.log), for reading what a run did.
	Logs string
}

// ProfileFor is how long a server profile of a phase lasts.
const ProfileFor = 5 * time.Second

func (o *Options) defaults() {
	if o.Single <= 0 {
		o.Single = 20000
	}
	if o.Conns <= 0 {
		o.Conns = 16
	}
	if o.Batched <= 0 {
		o.Batched = 100000
	}
	if o.Batch <= 0 || o.Batch > client.MaxBatch {
		o.Batch = client.MaxBatch
	}
	if o.BatchConns <= 0 {
		o.BatchConns = 2
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 128
	}
	if len(o.Modes) == 0 {
		o.Modes = []string{"local", "handoff"}
	}
	if o.RedisServer == "" {
		o.RedisServer = "redis-server"
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 10
	}
}

// Run measures the path users take, through real processes: HTTP API
// (auth on) → validation → placement → enqueue (→ hand-off) → claim by an
// `ax worker` → ack. Per mode it starts an etcd, one redis-server
// (password required) and one `ax server` per region, and Workers
// `ax worker`s in the region that runs the tasks; then
//
//  1. single: Single tasks, POST /v1/tasks from Conns keep-alive connections;
//  2. batch: Batched tasks, POST /v1/tasks/batch of Batch from BatchConns;
//
// each timed from the first request to the last answer (accepted/s) and to
// the last task's success (done/s), with the workers draining meanwhile.
// CPU of the servers and the workers is read from /proc/<pid>/stat, the
// Redis servers' from INFO cpu and commandstats.
func Run(ctx context.Context, o Options, progress bench.Progress) (*bench.Summary, error) {
	o.defaults()
	if o.Exe == "" {
		return nil, errNoExe
	}
	if o.Etcd == nil {
		return nil, errors.New("bench: api: no etcd starter (api.Options.Etcd)")
	}
	switch o.AOF {
	case "", "everysec", "always", "no":
	default:
		return nil, fmt.Errorf("bench: api: --aof %q: want everysec, always or no (the appendfsync policy)", o.AOF)
	}
	s := bench.NewSummary("api")
	s.Params = map[string]any{"single": o.Single, "conns": o.Conns, "batched": o.Batched, "batch": o.Batch,
		"batch_conns": o.BatchConns, "workers": o.Workers, "concurrency": o.Concurrency, "modes": o.Modes,
		"payload_bytes": len(bench.Payload64), "auth": true, "aof": o.AOF}
	for _, mode := range o.Modes {
		if base := strings.TrimSuffix(mode, "-tls"); base != "local" && base != "handoff" {
			return nil, fmt.Errorf("bench: api: mode %q: want local, handoff, local-tls or handoff-tls", mode)
		}
		if err := apiMode(ctx, s, o, mode, progress); err != nil {
			return nil, fmt.Errorf("bench: api %s: %w", mode, err)
		}
	}
	s.Finish()
	return s, nil
}

// apiRegion is one region of an API run.
type apiRegion struct {
	name     string
	redis    *redisproc.Server
	tlsPort  int // with TLS: Redis' TLS port, the one ax processes use
	rdb      *redis.Client
	store    *store.Store
	api      string
	cfg      string
	server   *axProc
	password string
}

// apiFed is the federation of one mode.
type apiFed struct {
	o       Options
	dir     string
	regions []*apiRegion
	workers []*axProc
	submit  string // submitter token
	admin   string // admin token (reads /v1/regions)
	cluster string
	stops   []func()
	// tls: TLS on every hop; ca signed every certificate of the run.
	tls       bool
	ca        *tlsconf.CA
	cert, key string
	clientTLS *tls.Config
}

func (f *apiFed) close() {
	for _, w := range f.workers {
		w.stop()
	}
	for _, r := range f.regions {
		if r.server != nil {
			r.server.stop()
		}
	}
	for i := len(f.stops) - 1; i >= 0; i-- {
		f.stops[i]()
	}
	_ = os.RemoveAll(f.dir)
}

func (f *apiFed) procs() []*axProc {
	ps := append([]*axProc(nil), f.workers...)
	for _, r := range f.regions {
		ps = append(ps, r.server)
	}
	return ps
}

func secret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// startFed starts the regions of a mode: names[len-1] runs the tasks.
func startFed(ctx context.Context, o Options, names []string, withTLS bool) (_ *apiFed, err error) {
	dir, err := os.MkdirTemp("", "ax-bench-api-")
	if err != nil {
		return nil, err
	}
	f := &apiFed{o: o, dir: dir, submit: secret(), admin: secret(), cluster: secret(), tls: withTLS}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if withTLS {
		if f.ca, err = tlsconf.NewCA(dir); err != nil {
			return nil, err
		}
		if f.cert, f.key, err = f.ca.Issue("server", 2); err != nil {
			return nil, err
		}
		if f.clientTLS, err = tlsconf.Client(tlsconf.Files{CA: f.ca.File}); err != nil {
			return nil, err
		}
	}
	endpoint, stop, err := o.Etcd(filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	f.stops = append(f.stops, stop)
	for _, name := range names {
		r := &apiRegion{name: name, password: secret(), cfg: filepath.Join(dir, name+".yaml")}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ropts := []redisproc.Option{redisproc.WithBinary(o.RedisServer), redisproc.WithPassword(r.password)}
		if o.AOF != "" {
			ropts = append(ropts, redisproc.WithAOF(o.AOF))
		}
		if withTLS {
			addr, err := freeAddr()
			if err != nil {
				cancel()
				return nil, err
			}
			port := addr[strings.LastIndexByte(addr, ':')+1:]
			r.tlsPort, _ = strconv.Atoi(port)
			ropts = append(ropts, redisproc.WithConfig("tls-port "+port, "tls-cert-file "+f.cert,
				"tls-key-file "+f.key, "tls-ca-cert-file "+f.ca.File, "tls-auth-clients no"))
		}
		r.redis, err = redisproc.Start(sctx, ropts...)
		cancel()
		if err != nil {
			return nil, err
		}
		f.stops = append(f.stops, r.redis.Stop)
		r.rdb = redis.NewClient(&redis.Options{Addr: r.redis.Addr(), Password: r.password, PoolSize: 8})
		f.stops = append(f.stops, func() { _ = r.rdb.Close() })
		if r.store, err = store.New(r.rdb, queue.Options{Region: name}); err != nil {
			return nil, err
		}
		listen, err := freeAddr()
		if err != nil {
			return nil, err
		}
		r.api = "http://" + listen
		if withTLS {
			r.api = "https://" + listen
		}
		if err := os.WriteFile(r.cfg, []byte(f.config(r, names, endpoint, listen)), 0o600); err != nil {
			return nil, err
		}
		f.regions = append(f.regions, r)
	}
	for _, r := range f.regions {
		env := append(axEnv(), "AX_REDIS_PASSWORD="+r.password, "AX_AUTH_CLUSTER_TOKEN="+f.cluster)
		if r.server, err = startAx(o.Exe, r.name+"/server", o.Logs, env, "server", "--config", r.cfg); err != nil {
			return nil, err
		}
	}
	run := f.regions[len(f.regions)-1]
	for i := range o.Workers {
		id := fmt.Sprintf("%s-w%d", run.name, i+1)
		w, err := startAx(o.Exe, run.name+"/"+id, o.Logs, append(axEnv(), "AX_REDIS_PASSWORD="+run.password),
			"worker", "--config", run.cfg, "--pool", "cpu", "--id", id)
		if err != nil {
			return nil, err
		}
		f.workers = append(f.workers, w)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: f.clientTLS}}
	err = waitFor(ctx, 60*time.Second, "every region placeable", f.procs(), func() bool {
		for _, r := range f.regions {
			if !f.placeable(ctx, hc, r.api, run.name) {
				return false
			}
		}
		return true
	})
	return f, err
}

// axEnv is the bench's environment without AX_ settings, logs as text.
func axEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AX_") {
			env = append(env, kv)
		}
	}
	return append(env, "AX_LOG_FORMAT=text")
}

// config is one region's file: auth on (tokens as SHA-256; the secrets
// reach the processes in the environment), one pool with room for every
// task of the run, so backpressure never refuses the bench.
func (f *apiFed) config(r *apiRegion, names []string, etcd, listen string) string {
	o := f.o
	return fmt.Sprintf(`region: %s
listen: %s
regions: [%s]
etcd:
  regional: {endpoints: [%s]}
  global: {endpoints: [%s]}
  prefix: /axbench/
redis: %s
pools:
  - {name: cpu, tags: {class: cpu}, slots: %d, queue_capacity: %d, price_per_slot_hour: 0.04}
auth:
  enabled: true
  tokens:
    - {name: bench, token_sha256: %s, role: submitter, tenant: bench}
    - {name: bench-admin, token_sha256: %s, role: admin, tenant: ""}
worker:
  concurrency: %d
http_server:
  profiling: %v
%s`, r.name, listen, strings.Join(names, ", "), etcd, etcd, f.redisAddr(r),
		o.Workers*o.Concurrency, 4*(o.Single+o.Batched), sha(f.submit), sha(f.admin), o.Concurrency, o.ServerProfile != "", f.apiTLS())
}

// redisAddr is r's redis: block value: its TLS port with TLS.
func (f *apiFed) redisAddr(r *apiRegion) string {
	if !f.tls {
		return "{addr: " + r.redis.Addr() + "}"
	}
	return fmt.Sprintf("{addr: \"rediss://127.0.0.1:%d\", tls: {ca: %q}}", r.tlsPort, f.ca.File)
}

// apiTLS is the http_server block's tls line of a run with TLS (https, peers
// verified with the run's CA).
func (f *apiFed) apiTLS() string {
	if !f.tls {
		return ""
	}
	return fmt.Sprintf("  tls: {cert: %q, key: %q, ca: %q}\n", f.cert, f.key, f.ca.File)
}

// placeable: the server at api sees every region healthy with a leader,
// and run's pool with live slots.
func (f *apiFed) placeable(ctx context.Context, hc *http.Client, api, run string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/regions", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+f.admin)
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var rs struct {
		Regions []struct {
			Name    string `json:"name"`
			Healthy bool   `json:"healthy"`
			Leader  string `json:"leader"`
			Pools   []struct {
				Slots int `json:"slots"`
			} `json:"pools"`
		} `json:"regions"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&rs) != nil || len(rs.Regions) != len(f.regions) {
		return false
	}
	for _, g := range rs.Regions {
		if !g.Healthy || g.Leader == "" {
			return false
		}
		if g.Name == run && (len(g.Pools) == 0 || g.Pools[0].Slots == 0) {
			return false
		}
	}
	return true
}

// apiMeter reads the CPU of every process and Redis of a federation.
type apiMeter struct {
	f       *apiFed
	env     *bench.Env // the regions' Redis servers, for INFO
	start   time.Time
	servers time.Duration
	workers time.Duration
	inner   *bench.Meter
}

func (f *apiFed) cpu(ps []*axProc) time.Duration {
	var t time.Duration
	for _, p := range ps {
		t += p.cpu()
	}
	return t
}

func (f *apiFed) serverProcs() []*axProc {
	var ps []*axProc
	for _, r := range f.regions {
		ps = append(ps, r.server)
	}
	return ps
}

func (f *apiFed) startMeter(ctx context.Context, env *bench.Env) *apiMeter {
	return &apiMeter{f: f, env: env, start: time.Now(), servers: f.cpu(f.serverProcs()),
		workers: f.cpu(f.workers), inner: env.StartMeter(ctx)}
}

// succeeded sums the regions' success counters.
func (f *apiFed) succeeded(ctx context.Context) int64 {
	var n int64
	for _, r := range f.regions {
		c, err := r.store.Tasks().Counts(ctx)
		if err != nil {
			return -1
		}
		n += int64(c.Succeeded)
	}
	return n
}

// apiMode runs the two submit phases of one mode.
func apiMode(ctx context.Context, s *bench.Summary, o Options, mode string, progress bench.Progress) error {
	names := []string{"bench-a"}
	base, withTLS := strings.CutSuffix(mode, "-tls")
	if base == "handoff" {
		names = []string{"bench-a", "bench-b"}
	}
	progress.Report(mode+" start", 0, 0)
	f, err := startFed(ctx, o, names, withTLS)
	if err != nil {
		return err
	}
	defer f.close()
	var nodes []*redis.Client
	for _, r := range f.regions {
		nodes = append(nodes, r.rdb)
	}
	env := bench.Over(nodes...)
	if s.Redis.Version == "" {
		s.Redis = bench.RedisInfo{Managed: true, Version: bench.InfoField(must(f.regions[0].rdb.Info(ctx, "server").Result()), "redis_version"),
			Config: "one temporary redis-server per region started by ax bench (requirepass): " + persistence(o.AOF) + `, save "", maxmemory-policy noeviction`}
	}
	run := f.regions[len(f.regions)-1]
	sp := map[string]any{"type": "noop", "payload": json.RawMessage(bench.Payload64), "tags": map[string]string{"class": "cpu"}}
	if base == "handoff" {
		sp["regions"] = []string{run.name}
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return err
	}
	// Keep-alive: one idle connection kept per submitting goroutine.
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: max(o.Conns, o.BatchConns), MaxConnsPerHost: max(o.Conns, o.BatchConns),
		IdleConnTimeout: 30 * time.Second, TLSClientConfig: f.clientTLS}
	defer tr.CloseIdleConnections()
	c, err := client.New(f.regions[0].api, client.WithToken(f.submit), client.WithHTTPClient(&http.Client{Transport: tr, Timeout: 30 * time.Second}))
	if err != nil {
		return err
	}
	for _, ph := range []struct {
		name      string
		n, per, k int
	}{{"single", o.Single, 1, o.Conns}, {"batch", o.Batched, o.Batch, o.BatchConns}} {
		if ph.n == 0 {
			continue
		}
		if err := apiPhase(ctx, s, f, env, c, raw, mode+"/"+ph.name, ph.n, ph.per, ph.k, run, progress); err != nil {
			return err
		}
	}
	return nil
}

func must(s string, _ error) string { return s }

// apiPhase submits n tasks in requests of per from k goroutines and waits
// until all succeeded.
func apiPhase(ctx context.Context, s *bench.Summary, f *apiFed, env *bench.Env, c *client.Client, raw []byte,
	name string, n, per, k int, run *apiRegion, progress bench.Progress) error {
	base := f.succeeded(ctx)
	type sample struct {
		id   string
		sent time.Time
	}
	var (
		next, accepted atomic.Int64
		mu             sync.Mutex
		firstErr       error
		picks          []sample
		wg             sync.WaitGroup
	)
	// A batch body is the same for every request: encode it once.
	var body []json.RawMessage
	if per > 1 {
		body = make([]json.RawMessage, per)
		for i := range body {
			body[i] = raw
		}
	}
	var one task.Spec
	if err := json.Unmarshal(raw, &one); err != nil {
		return err
	}
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	stopBar := bench.Ticker(ctx, func() { progress.Report(name, int(accepted.Load()), n) })
	m := f.startMeter(ctx, env)
	profiled := f.profile(ctx, name)
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := int(next.Add(int64(per))) - per
				if start >= n || ctx.Err() != nil {
					return
				}
				cnt := min(per, n-start)
				sent := time.Now()
				if per == 1 {
					r, err := c.Submit(ctx, &one)
					if err != nil {
						fail(fmt.Errorf("POST /v1/tasks: %w", err))
						return
					}
					if start%f.o.SampleEvery == 0 {
						mu.Lock()
						picks = append(picks, sample{r.ID, sent})
						mu.Unlock()
					}
				} else {
					r, err := c.SubmitBatch(ctx, body[:cnt])
					if err != nil {
						fail(fmt.Errorf("POST /v1/tasks/batch: %w", err))
						return
					}
					if r.Rejected > 0 {
						fail(fmt.Errorf("POST /v1/tasks/batch: %d of %d rejected: %s", r.Rejected, cnt, firstRejection(r)))
						return
					}
					mu.Lock()
					for i := 0; i < cnt; i += f.o.SampleEvery {
						picks = append(picks, sample{r.Results[i].Task.ID, sent})
					}
					mu.Unlock()
				}
				accepted.Add(int64(cnt))
			}
		}()
	}
	wg.Wait()
	acceptWall := time.Since(m.start)
	stopBar()
	if firstErr != nil {
		return firstErr
	}
	err := bench.Await(ctx, name+" drain", n, func() int64 { return f.succeeded(ctx) - base }, progress)
	if err != nil {
		return err
	}
	u := m.inner.Stop(ctx)
	serverCPU := f.cpu(f.serverProcs()) - m.servers
	workerCPU := f.cpu(f.workers) - m.workers
	// The phase's figures end with its last success, not with a profile
	// still being taken.
	if err := profiled(); err != nil {
		return err
	}
	u.AxCPU = serverCPU
	ph := s.AddPhase(name, int64(n), u)

	var lat bench.Samples
	for _, p := range picks {
		tk, err := run.store.Get(ctx, p.id)
		if err != nil {
			return fmt.Errorf("reading task %s: %w", p.id, err)
		}
		if tk.StartedAt != nil {
			lat.Add(tk.StartedAt.Sub(p.sent))
		}
	}
	d := lat.Dist()
	per1 := func(t time.Duration) float64 { return bench.Round(float64(t.Microseconds())/float64(n), 2) }
	target := map[string]string{"local/single": "≥ 10000", "local/batch": "≥ 50000", "handoff/batch": "≥ 20000"}[name]
	key := strings.ReplaceAll(name, "/", "_")
	s.Add(key+"_accepted", float64(n)/acceptWall.Seconds(), "tasks/s", "higher", target)
	s.Add(key+"_done", ph.PerS, "tasks/s", "higher", "")
	s.Add(key+"_submit_to_start_p50", bench.Ms(d.P50), "ms", "lower", "")
	s.Add(key+"_submit_to_start_p99", bench.Ms(d.P99), "ms", "lower", "")
	s.Add(key+"_server_cpu_per_task", per1(serverCPU), "µs", "lower", "")
	s.Add(key+"_worker_cpu_per_task", per1(workerCPU), "µs", "lower", "")
	s.Add(key+"_redis_cpu_per_task", ph.RedisUsPer, "µs", "lower", "")
	s.Counts[key+"_sampled"] = int64(d.N)
	return nil
}

func firstRejection(r *apiv1.BatchResponse) string {
	for _, it := range r.Results {
		if it.Error != nil {
			var b bytes.Buffer
			_ = json.NewEncoder(&b).Encode(it.Error)
			return strings.TrimSpace(b.String())
		}
	}
	return ""
}

// persistence says how the run's Redis keeps its data.
func persistence(aof string) string {
	if aof == "" {
		return "appendonly no"
	}
	return "appendonly yes, appendfsync " + aof
}

// profile starts a CPU profile of every server over the first ProfileFor
// of phase (Options.ServerProfile); the function it returns waits for
// them and reports the first failure.
func (f *apiFed) profile(ctx context.Context, phase string) func() error {
	if f.o.ServerProfile == "" {
		return func() error { return nil }
	}
	var wg sync.WaitGroup
	errs := make([]error, len(f.regions))
	for i, r := range f.regions {
		wg.Go(func() {
			file := filepath.Join(f.o.ServerProfile, strings.ReplaceAll(phase, "/", "-")+"-"+r.name+".prof")
			errs[i] = f.fetchProfile(ctx, r.api, file)
		})
	}
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}
}

// fetchProfile writes api's CPU profile over ProfileFor to file.
func (f *apiFed) fetchProfile(ctx context.Context, api, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", api, int(ProfileFor/time.Second)), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.admin)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: f.clientTLS}}).Do(req)
	if err != nil {
		return fmt.Errorf("profile of %s: %w", api, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile of %s: %s", api, resp.Status)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return fmt.Errorf("profile of %s: %w", api, err)
	}
	return out.Close()
}

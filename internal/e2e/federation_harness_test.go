package e2e

// A federation of real ax processes for end-to-end tests: two (or more)
// regions, each with its own redis-server (password required), one or more
// `ax server`s and one `ax worker` per pool, auth ON with two tenants'
// tokens and a cluster token. Use it like this:
//
//	fed := newFederation(t, fedOpts{})           // us-east-1 and eu-west-1, ready to place
//	api := fed.server("us-east-1").api            // http://127.0.0.1:port
//	id, where := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "noop"})
//	h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{"type": "noop"})
//	tk := fed.waitState("us-east-1", tokSubmitterA, h.ID, task.Success, 20*time.Second)
//	status, body := fed.call("eu-west-1", tokOperator, "POST", "/v1/tasks/"+h.ID+"/replay", nil)
//	rec := fed.region("eu-west-1").task(t, h.ID) // straight from that region's Redis
//
// Every region's pool is "cpu" with tags {class: cpu}, so a spec without
// tags or with {class: cpu} can run anywhere; handedOffTask pins the task
// to the other region with the spec's `regions` field (a hard placement
// filter), which is the deterministic way to make the home region hand a
// task off: the submit lands in `from`, placement picks `to`, and `from`'s
// leader sends it over with the cluster token.
//
// Options: fedOpts.worker is YAML put inside every region's `worker:` block
// (exec rules, http prefixes), fedOpts.regionWorker the same for one region
// only, fedOpts.pools replaces one region's pool list (prices, queue
// capacity), fedOpts.extra is top-level YAML added to each
// file (keys the harness does not write itself), fedOpts.ownEtcd gives each
// region its own regional etcd (the global one is always shared),
// fedOpts.servers starts more servers per region. Secrets reach the
// processes the way operators are told to pass them: the Redis password as
// AX_REDIS_PASSWORD and the cluster token as AX_AUTH_CLUSTER_TOKEN, in the
// environment, never in the file; workers get only the Redis password
// unless fedOpts.sharedEnv. fed.secrets() lists them, for tests that check
// nothing leaks them.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/netem"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/internal/tlsconf"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Token names of a federation (fed.token(name) is the secret itself).
const (
	tokSubmitterA = "submitter-a" // submitter of tenant team-a
	tokSubmitterB = "submitter-b" // submitter of tenant team-b
	tokOperatorA  = "operator-a"  // operator of tenant team-a only
	tokOperator   = "operator"    // operator of every tenant
	tokAdmin      = "admin"       // admin of every tenant
)

// tenantOf is the tenant each token's tasks belong to ("" for all).
var tenantOf = map[string]string{
	tokSubmitterA: "team-a", tokSubmitterB: "team-b", tokOperatorA: "team-a", tokOperator: "", tokAdmin: "",
}

type fedOpts struct {
	// regions of the federation; default us-east-1 and eu-west-1.
	regions []string
	// servers per region; default 1.
	servers int
	// noWorkers starts no worker (fed.startWorker starts them later); the
	// federation is then not waited for to be placeable.
	noWorkers bool
	// ownEtcd gives each region its own regional etcd; the global etcd is
	// shared. Default: one etcd for everything (cheaper on small machines).
	ownEtcd bool
	// wan puts an emulated wide-area link (internal/netem) in front of
	// each region: between its processes and the global etcd
	// (fedRegion.global), and in front of each of its servers as the
	// other regions' servers reach it (its public_addr, fedRegion.inbound;
	// the harness itself calls the servers directly). Partition or Cut
	// one to cut the region off; fed.setLink changes them all.
	wan *netem.Link
	// redisLink puts a link (internal/netem, no delay) between each
	// region's processes and its Redis (fedRegion.redisLink): retarget it
	// to make the address reach another Redis.
	redisLink bool
	// redisPassword is every region's Redis password; default: a random
	// one per region.
	redisPassword string
	// lease, heartbeat and ttl (etcd session) default to 3s, 1s and 2s.
	lease, heartbeat, ttl time.Duration
	// maxPause is every region's retry.max_pause; default: ax's default.
	maxPause time.Duration
	// worker is YAML inside each region's `worker:` block, unindented.
	worker string
	// regionWorker is YAML added to one region's `worker:` block (after
	// worker): handler configs that differ between regions.
	regionWorker map[string]string
	// pools replaces one region's `pools:` list (YAML list items,
	// unindented); default: cpu {class: cpu}, 50 slots, $0.04/slot-hour.
	pools map[string]string
	// unserved names, per region, pools no worker serves: waitPlaceable
	// does not wait for their slots.
	unserved map[string][]string
	// extra is top-level YAML added to each region's file.
	extra string
	// shards spreads one region's tasks over that many shards of its one
	// Redis (redis.shards; default 1); its test store (fed.region().store)
	// uses the same.
	shards map[string]int
	// sharedEnv gives workers the servers' environment, cluster token
	// included (one env file for both, as many deployments have). Default:
	// workers get only the Redis password.
	sharedEnv bool
	// tokens are more entries of auth.tokens (YAML list items, unindented).
	tokens string
	// httpServer is YAML inside each region's `http_server:` block,
	// unindented. The harness turns public_details on (tests scrape
	// /metrics and /readyz without a token) unless privateDetails.
	httpServer     string
	privateDetails bool
	// tls puts TLS on every hop: the API serves https only and asks every
	// client for a certificate (mutual TLS, servers between regions too),
	// servers and workers reach Redis only on its TLS port (rediss://, with
	// a client certificate). fed.certs holds the files; fed.callAPI
	// presents the client certificate.
	tls bool
}

type federation struct {
	t      *testing.T
	opts   fedOpts
	global *testenv.Etcd
	// globalProxy stands between the servers and workers and the global
	// etcd (and the regional one unless ownEtcd): Freeze it for an outage.
	globalProxy *testenv.Proxy
	regions     map[string]*fedRegion
	order       []string
	tokens      map[string]string // name → plain token
	cluster     string            // the cluster token
	procs       *procGroup
	certs       *testenv.Certs // with opts.tls
	http        *http.Client   // the harness's API client (with opts.tls: the CA and the client certificate)
}

// on returns the federation for subtest t: its helpers fail t, not the
// test that started the federation (FailNow from a subtest's goroutine on
// its parent aborts the test binary).
func (f *federation) on(t *testing.T) *federation {
	g := *f
	g.t = t
	return &g
}

// fedRegion is one region of a federation.
type fedRegion struct {
	name     string
	etcd     *testenv.Etcd // regional (== the global one unless ownEtcd)
	redis    *testenv.Redis
	password string
	rdb      *redis.Client
	tlsPort  int // with opts.tls: the Redis TLS port, the only one ax processes use
	store    *store.Store
	cfgPath  string
	servers  []*proc
	workers  []*proc

	// global is the region's link to the global etcd and inbound its
	// servers' links from the other regions (one per server, in order),
	// with fedOpts.wan.
	global  *netem.Proxy
	inbound []*netem.Proxy
	// redisLink stands between the region's processes and its Redis,
	// with fedOpts.redisLink.
	redisLink *netem.Proxy
}

func newFederation(t *testing.T, o fedOpts) *federation {
	t.Helper()
	if len(o.regions) == 0 {
		o.regions = []string{"us-east-1", "eu-west-1"}
	}
	if o.servers == 0 {
		o.servers = 1
	}
	if o.lease == 0 {
		o.lease, o.heartbeat = 3*time.Second, time.Second
	}
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	f := &federation{t: t, opts: o, global: testenv.StartEtcd(t), regions: map[string]*fedRegion{},
		order: o.regions, tokens: map[string]string{}, cluster: "cluster-" + randomHex(16)}
	f.globalProxy = testenv.StartProxy(t, f.global.Endpoint())
	for name := range tenantOf {
		f.tokens[name] = name + "-" + randomHex(16)
	}
	f.http = http.DefaultClient
	if o.tls {
		f.certs = testenv.NewCerts(t)
		tc, err := tlsconf.Client(tlsconf.Files{CA: f.certs.CA, Cert: f.certs.Client, Key: f.certs.ClientKey})
		if err != nil {
			t.Fatal(err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		f.http = &http.Client{Transport: tr}
		t.Cleanup(tr.CloseIdleConnections)
	}
	dir := t.TempDir()
	for _, name := range o.regions {
		r := &fedRegion{name: name, etcd: f.global, password: cmp.Or(o.redisPassword, "redis-"+randomHex(12)),
			cfgPath: filepath.Join(dir, name+".yaml")}
		if o.ownEtcd {
			r.etcd = testenv.StartEtcd(t)
		}
		if o.wan != nil {
			r.global = startLink(t, f.global.Endpoint(), *o.wan)
		}
		ro := testenv.RedisOptions{Password: r.password}
		if o.tls {
			r.tlsPort = testenv.FreePort(t)
			ro.Extra = f.certs.RedisTLS(r.tlsPort)
		}
		r.redis = testenv.StartRedis(t, ro)
		r.rdb = r.redis.Client()
		if o.redisLink {
			r.redisLink = startLink(t, r.redis.Addr(), netem.Link{})
		}
		s, err := store.New(r.rdb, queue.Options{Region: name, Lease: o.lease, Shards: o.shards[name]})
		if err != nil {
			t.Fatal(err)
		}
		r.store = s
		if err := os.WriteFile(r.cfgPath, []byte(f.config(r)), 0o600); err != nil {
			t.Fatal(err)
		}
		f.regions[name] = r
	}
	// Registered after the Redis and etcd cleanups, so it runs before them.
	f.procs = newProcGroup(t)
	for _, name := range o.regions {
		for i := 0; i < o.servers; i++ {
			f.startServer(name)
		}
	}
	if !o.noWorkers {
		for _, name := range o.regions {
			f.startWorker(name, "cpu")
		}
		f.waitPlaceable()
	}
	return f
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// config is one region's file. Tokens are given as their SHA-256 only; the
// secrets come from the environment (env).
func (f *federation) config(r *fedRegion) string {
	var tokens strings.Builder
	for _, name := range []string{tokSubmitterA, tokSubmitterB, tokOperatorA, tokOperator, tokAdmin} {
		role := strings.TrimSuffix(strings.TrimSuffix(name, "-a"), "-b")
		fmt.Fprintf(&tokens, "    - {name: %s, token_sha256: %s, role: %s, tenant: %q}\n",
			name, sha256Hex(f.tokens[name]), role, tenantOf[name])
	}
	if f.opts.tokens != "" {
		tokens.WriteString(indent(f.opts.tokens, "    ") + "\n")
	}
	o := f.opts
	addr := r.redis.Addr()
	if r.redisLink != nil {
		addr = r.redisLink.Addr()
	}
	redisAddr := fmt.Sprintf("{addr: %s}", addr)
	if n := f.opts.shards[r.name]; n > 0 {
		redisAddr = fmt.Sprintf("{addr: %s, shards: %d}", addr, n)
	}
	httpServer := fmt.Sprintf("public_details: %v\n%s", !o.privateDetails, o.httpServer)
	if o.tls {
		c := f.certs
		redisAddr = fmt.Sprintf("{addr: \"rediss://127.0.0.1:%d\", tls: {ca: %q, cert: %q, key: %q}}", r.tlsPort, c.CA, c.Client, c.ClientKey)
		httpServer += fmt.Sprintf("\ntls: {cert: %q, key: %q, client_ca: %q, ca: %q}\n", c.Cert, c.Key, c.CA, c.CA)
	}
	extra := "http_server:\n" + indent(httpServer, "  ") + "\n" + o.extra
	retry := "{base: 100ms, cap: 1s, max_retries: 2}"
	if o.maxPause > 0 {
		retry = fmt.Sprintf("{base: 100ms, cap: 1s, max_retries: 2, max_pause: %s}", o.maxPause)
	}
	pools := o.pools[r.name]
	if pools == "" {
		pools = "- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}"
	}
	return fmt.Sprintf(`region: %s
provider: %s
listen: 127.0.0.1:0
regions: [%s]
etcd:
  regional: {endpoints: [%s]}
  global: {endpoints: [%s]}
  session_ttl: %s
redis: %s
pools:
%slease: {duration: %s, heartbeat: %s}
retry: %s
auth:
  enabled: true
  tokens:
%sworker:
  concurrency: 20
  shutdown_grace: 1s
%s
%s
%s
`, r.name, providerOf(r.name), strings.Join(f.order, ", "), f.regionalEndpoint(r), f.globalEndpoint(r), o.ttl, redisAddr,
		indent(pools, "  ")+"\n", o.lease, o.heartbeat, retry, tokens.String(), indent(o.worker, "  "),
		indent(o.regionWorker[r.name], "  "), extra)
}

// providerOf is the provider the harness gives a region: us-east-1 aws,
// eu-west-1 gcp, any other azure (`ax regions` shows each region's own).
func providerOf(region string) string {
	switch region {
	case "us-east-1":
		return "aws"
	case "eu-west-1":
		return "gcp"
	}
	return "azure"
}

// regionalEndpoint is the regional etcd as the region's processes reach it:
// its own etcd, or the global one through the proxy (one etcd for all).
func (f *federation) regionalEndpoint(r *fedRegion) string {
	if r.etcd == f.global {
		return f.globalProxy.URL()
	}
	return r.etcd.Endpoint()
}

// globalEndpoint is the global etcd as the region's processes reach it:
// through its WAN link, or the shared proxy.
func (f *federation) globalEndpoint(r *fedRegion) string {
	if r.global != nil {
		return r.global.URL()
	}
	return f.globalProxy.URL()
}

// startLink starts an emulated link to target; t.Cleanup closes it.
func startLink(t *testing.T, target string, l netem.Link) *netem.Proxy {
	t.Helper()
	p, err := netem.Start(target, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// setLink gives every WAN link of the federation l.
func (f *federation) setLink(l netem.Link) {
	for _, r := range f.regions {
		if r.global != nil {
			r.global.SetLink(l)
		}
		for _, p := range r.inbound {
			p.SetLink(l)
		}
	}
}

// partition cuts region r off from the other regions (their calls to its
// servers: SYNs dropped, open connections reset); heal ends it.
func (r *fedRegion) partition() {
	for _, p := range r.inbound {
		p.Partition()
		p.Cut()
	}
}

func (r *fedRegion) heal() {
	for _, p := range r.inbound {
		p.Heal()
	}
}

func indent(s, by string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = by + l
		}
	}
	return strings.Join(lines, "\n")
}

// baseEnv is the test's environment without any AX_ variable, plus text logs.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AX_") {
			env = append(env, kv)
		}
	}
	return append(env, "AX_LOG_FORMAT=text")
}

// serverEnv is what a region's servers get: the Redis password and the
// cluster token.
func (f *federation) serverEnv(r *fedRegion) []string {
	return append(baseEnv(), "AX_REDIS_PASSWORD="+r.password, "AX_AUTH_CLUSTER_TOKEN="+f.cluster)
}

// workerEnv is what a region's workers get: the Redis password only (a
// worker needs no cluster token), or with sharedEnv the servers' whole
// environment.
func (f *federation) workerEnv(r *fedRegion) []string {
	if f.opts.sharedEnv {
		return f.serverEnv(r)
	}
	return append(baseEnv(), "AX_REDIS_PASSWORD="+r.password)
}

// secrets are the values no task may ever see: the cluster token and every
// region's Redis password.
func (f *federation) secrets() map[string]string {
	s := map[string]string{"cluster token": f.cluster}
	for _, name := range f.order {
		s[name+" Redis password"] = f.regions[name].password
	}
	return s
}

// region returns a region of the federation.
func (f *federation) region(name string) *fedRegion {
	f.t.Helper()
	r := f.regions[name]
	if r == nil {
		f.t.Fatalf("no region %q in the federation (%v)", name, f.order)
	}
	return r
}

// server is the region's first server.
func (f *federation) server(region string) *proc { return f.region(region).servers[0] }

// token is the plain token of one of the tok* names.
func (f *federation) token(name string) string {
	f.t.Helper()
	tok, ok := f.tokens[name]
	if !ok {
		f.t.Fatalf("no token %q", name)
	}
	return tok
}

// startServer starts one more `ax server` in region and waits until it
// listens.
func (f *federation) startServer(region string) *proc {
	f.t.Helper()
	r := f.region(region)
	env := f.serverEnv(r)
	var link *netem.Proxy
	if f.opts.wan != nil {
		// The link learns the server's port once it listens.
		link = startLink(f.t, "", *f.opts.wan)
		env = append(env, "AX_PUBLIC_ADDR="+link.URL())
		r.inbound = append(r.inbound, link)
	}
	p := f.procs.start(fmt.Sprintf("%s/server-%d", region, len(r.servers)+1), env,
		"server", "--config", r.cfgPath)
	if f.opts.tls {
		p.api = "https://" + strings.TrimPrefix(p.api, "http://")
	}
	if link != nil {
		link.SetTarget(p.api)
	}
	r.servers = append(r.servers, p)
	return p
}

// startWorker starts an `ax worker` for pool in region; args are added to
// its command line (e.g. "--concurrency", "4").
func (f *federation) startWorker(region, pool string, args ...string) *proc {
	f.t.Helper()
	r := f.region(region)
	id := fmt.Sprintf("%s-%s-w%d", region, pool, len(r.workers)+1)
	p := f.procs.start(region+"/"+id, f.workerEnv(r),
		append([]string{"worker", "--config", r.cfgPath, "--pool", pool, "--id", id}, args...)...)
	r.workers = append(r.workers, p)
	return p
}

// waitPlaceable waits until every server sees every region healthy, with a
// leader and live slots in each pool: from then on a submit is placed at
// once and a hand-off has a receiver.
func (f *federation) waitPlaceable() {
	f.t.Helper()
	for _, name := range f.order {
		for _, s := range f.region(name).servers {
			waitUntil(f.t, 30*time.Second, s.name+" to see every region placeable", func() bool {
				var rs struct {
					Regions []struct {
						Name    string `json:"name"`
						Healthy bool   `json:"healthy"`
						Leader  string `json:"leader"`
						Pools   []struct {
							Name  string `json:"name"`
							Slots int    `json:"slots"`
						} `json:"pools"`
					} `json:"regions"`
				}
				code, body := f.callAPI(s.api, tokAdmin, http.MethodGet, "/v1/regions", nil)
				if code != 200 || json.Unmarshal(body, &rs) != nil || len(rs.Regions) != len(f.order) {
					return false
				}
				for _, g := range rs.Regions {
					if !g.Healthy || g.Leader == "" || len(g.Pools) == 0 {
						return false
					}
					for _, p := range g.Pools {
						if p.Slots == 0 && !slices.Contains(f.opts.unserved[g.Name], p.Name) {
							return false
						}
					}
				}
				return true
			})
		}
	}
}

// call sends one request to region's first server with the named token
// ("" for none); body, when not nil, is sent as JSON (a []byte or string
// as it is). It returns the status and the body.
func (f *federation) call(region, token, method, path string, body any) (int, []byte) {
	f.t.Helper()
	return f.callAPI(f.server(region).api, token, method, path, body)
}

func (f *federation) callAPI(api, token, method, path string, body any) (int, []byte) {
	f.t.Helper()
	code, b, _ := f.callAPIHeader(api, token, method, path, body)
	return code, b
}

// callHeader is call that also returns the answer's headers.
func (f *federation) callHeader(region, token, method, path string, body any) (int, []byte, http.Header) {
	f.t.Helper()
	return f.callAPIHeader(f.server(region).api, token, method, path, body)
}

func (f *federation) callAPIHeader(api, token, method, path string, body any) (int, []byte, http.Header) {
	f.t.Helper()
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
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, api+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token(token))
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// submit posts one spec to region with token and returns the task's id and
// the region it was placed in; a refusal fails the test.
func (f *federation) submit(region, token string, spec map[string]any) (id, where string) {
	f.t.Helper()
	code, body := f.call(region, token, http.MethodPost, "/v1/tasks", spec)
	var r struct {
		ID     string `json:"id"`
		Region string `json:"region"`
	}
	if code != http.StatusCreated || json.Unmarshal(body, &r) != nil || r.ID == "" {
		f.t.Fatalf("submit to %s: %d %s", region, code, body)
	}
	return r.ID, r.Region
}

// handedOff is a task submitted in Home and handed off to Region.
type handedOff struct {
	ID     string
	Home   string // where it was submitted: keeps a HANDED_OFF forwarding record
	Region string // where it lives and runs
}

// handedOffTask submits spec (the harness adds regions: [to], and tags
// {class: cpu} when it has none) to from's server with token, and waits
// until from has handed it to `to`: from's store holds a HANDED_OFF record
// pointing at `to`, and `to`'s store holds the task.
func (f *federation) handedOffTask(from, to, token string, spec map[string]any) handedOff {
	f.t.Helper()
	if from == to {
		f.t.Fatalf("handedOffTask: from and to are both %s", from)
	}
	sp := map[string]any{}
	for k, v := range spec {
		sp[k] = v
	}
	sp["regions"] = []string{to}
	if _, ok := sp["tags"]; !ok {
		sp["tags"] = map[string]string{"class": "cpu"}
	}
	id, where := f.submit(from, token, sp)
	if where != to {
		f.t.Fatalf("task %s placed in %s, want %s", id, where, to)
	}
	home, dest := f.region(from), f.region(to)
	waitUntil(f.t, 20*time.Second, "task "+id+" handed off from "+from+" to "+to, func() bool {
		h, err := home.store.Get(context.Background(), id)
		if err != nil || h.State != task.HandedOff || h.HandedOffTo != to {
			return false
		}
		_, err = dest.store.Get(context.Background(), id)
		return err == nil
	})
	return handedOff{ID: id, Home: from, Region: to}
}

// getTask reads a task through region's API with token.
func (f *federation) getTask(region, token, id string) (task.Task, int) {
	f.t.Helper()
	code, body := f.call(region, token, http.MethodGet, "/v1/tasks/"+id, nil)
	var tk task.Task
	if code == 200 {
		if err := json.Unmarshal(body, &tk); err != nil {
			f.t.Fatalf("GET task %s: %v: %s", id, err, body)
		}
	}
	return tk, code
}

// waitState waits until the task, read through region's API with token, is
// in state, and returns it.
func (f *federation) waitState(region, token, id string, state task.State, within time.Duration) task.Task {
	f.t.Helper()
	var tk task.Task
	var code int
	start := time.Now()
	for time.Since(start) < within {
		if tk, code = f.getTask(region, token, id); code == 200 && tk.State == state {
			return tk
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatalf("task %s via %s: want %s within %v, last seen %d %s (reason %s, error %q)",
		id, region, state, within, code, tk.State, tk.Reason, tk.LastError)
	return tk
}

// waitStates is waitState for many tasks at once: it reads them 8 at a
// time (a read through a region that does not hold the task crosses to the
// one that does, over the WAN link of fedOpts.wan), again until each is in
// state, and fails when one is not within `within` of the call.
func (f *federation) waitStates(region, token string, ids []string, state task.State, within time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	left := slices.Clone(ids)
	last := map[string]string{}
	for {
		var mu sync.Mutex
		var still []string
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for _, id := range left {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				code, body := f.call(region, token, http.MethodGet, "/v1/tasks/"+id, nil)
				var tk task.Task
				if code == http.StatusOK && json.Unmarshal(body, &tk) == nil && tk.State == state {
					return
				}
				mu.Lock()
				still = append(still, id)
				last[id] = fmt.Sprintf("%d %s (reason %s, error %q)", code, tk.State, tk.Reason, tk.LastError)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(still) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(still)
			f.t.Fatalf("%d of %d tasks via %s not %s within %v; %s last seen %s", len(still), len(ids), region, state, within,
				still[0], last[still[0]])
		}
		left = still
		time.Sleep(50 * time.Millisecond)
	}
}

// task reads a task straight from the region's Redis.
func (r *fedRegion) task(t *testing.T, id string) *task.Task {
	t.Helper()
	tk, err := r.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("%s: task %s: %v", r.name, id, err)
	}
	return tk
}

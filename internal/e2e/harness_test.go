package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/lease"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
)

var axBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here builds and runs real ax processes: the slow kind
		// that `make check` (-short) leaves to `make test`.
		fmt.Println("e2e: skipped under -short (real processes); `make test` runs it")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "ax-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Everything the suite and its processes put in a temp dir lands under
	// dir, removed at the end: an `ax dev --tmp` killed by a test leaves
	// its Redis files and etcd WAL there, not in the machine's /tmp.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Setenv("TMPDIR", tmp)
	// make test builds bin/ax once and names it in AX_TEST_BIN; run alone,
	// the suite builds its own.
	// The processes the suite starts must not inherit it (ax warns of an
	// AX_ variable it does not read, and some tests hold its output to one line).
	axBin = os.Getenv("AX_TEST_BIN")
	_ = os.Unsetenv("AX_TEST_BIN")
	if axBin == "" {
		axBin = filepath.Join(dir, "ax")
		build := exec.Command("go", "build", "-o", axBin, "github.com/ax-sched/ax/cmd/ax")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build ax:", err)
			os.Exit(1)
		}
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
		prepareSDKs() // the whole suite: its SDK tests will need them
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is one region: an etcd, a Redis, a config file, and the ax
// processes a test starts.
type cluster struct {
	t      *testing.T
	etcd   *testenv.Etcd
	redis  *testenv.Redis
	dir    string
	store  *store.Store
	region string
	ttl    time.Duration
	procs  *procGroup
}

type proc struct {
	name string
	cmd  *exec.Cmd
	api  string
	log  *lockedBuffer
	done chan struct{}
}

type clusterOpts struct {
	lease, heartbeat time.Duration
	ttl              time.Duration
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	if o.lease == 0 {
		o.lease, o.heartbeat = 3*time.Second, time.Second
	}
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	c := &cluster{t: t, etcd: testenv.StartEtcd(t), redis: testenv.StartRedis(t), dir: t.TempDir(), region: "eu-west", ttl: o.ttl,
		procs: newProcGroup(t)}
	s, err := store.New(c.redis.Client(), queue.Options{Region: c.region, Lease: o.lease})
	if err != nil {
		t.Fatal(err)
	}
	c.store = s
	cfg := fmt.Sprintf(`region: eu-west
listen: 127.0.0.1:0
etcd:
  regional: {endpoints: [%s]}
  session_ttl: %s
redis: {addr: %s}
pools:
  - name: cpu
    tags: {class: cpu}
    slots: 200
    price_per_slot_hour: 0.0355
lease: {duration: %s, heartbeat: %s}
retry: {base: 100ms, cap: 1s, max_retries: 4}
auth: {enabled: false}
worker:
  concurrency: 200
  shutdown_grace: 1s
`, c.etcd.Endpoint(), o.ttl, c.redis.Addr(), o.lease, o.heartbeat)
	if err := os.WriteFile(filepath.Join(c.dir, "eu-west.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// serverListen finds the address a server bound in its start-up log line.
var serverListen = regexp.MustCompile(`msg="ax server started".* listen=(127\.0\.0\.1:\d+)`)

// start runs `ax <args>` with the cluster's config.
func (c *cluster) start(name string, args ...string) *proc {
	c.t.Helper()
	args = append(args, "--config", filepath.Join(c.dir, "eu-west.yaml"))
	return c.procs.start(name, append(os.Environ(), "AX_LOG_FORMAT=text"), args...)
}

// procGroup owns the ax processes of one test: every one is killed when
// the test ends, and their logs are printed when it failed.
type procGroup struct {
	t     *testing.T
	mu    sync.Mutex
	procs []*proc
}

func newProcGroup(t *testing.T) *procGroup {
	g := &procGroup{t: t}
	t.Cleanup(g.stopAll)
	return g
}

// start runs `ax <args>` with env as its whole environment. Servers listen
// on a port the kernel chooses (a port picked here and handed over could be
// taken by another test's process meanwhile); start waits for the server's
// start-up line and takes its API address from there.
func (g *procGroup) start(name string, env []string, args ...string) *proc {
	g.t.Helper()
	return g.startBin(axBin, name, env, args...)
}

// startBin is start for another program than ax (e.g. an SDK worker).
func (g *procGroup) startBin(bin, name string, env []string, args ...string) *proc {
	g.t.Helper()
	p := &proc{name: name, log: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	dieWithTest(p.cmd, true)
	if err := p.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	if bin == axBin && args[0] == "server" {
		waitUntil(g.t, 30*time.Second, name+" to start listening", func() bool {
			if m := serverListen.FindStringSubmatch(p.log.String()); m != nil {
				p.api = "http://" + m[1]
				return true
			}
			select {
			case <-p.done:
				g.t.Fatalf("%s exited before it listened: %s", name, tail(p.log.String(), 3000))
			default:
			}
			return false
		})
	}
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) signal(sig syscall.Signal) { _ = syscall.Kill(p.pid(), sig) }

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits (SIGKILL after 10 s).
func (p *proc) stop() {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

func (g *procGroup) stopAll() {
	g.mu.Lock()
	ps := g.procs
	g.procs = nil
	g.mu.Unlock()
	for _, p := range ps {
		select {
		case <-p.done:
		default:
			p.kill()
		}
		if g.t.Failed() {
			g.t.Logf("--- %s (pid %d) log tail:\n%s", p.name, p.pid(), tail(p.log.String(), 3000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// leaderPID reads the current leader of the region's election from etcd
// (its id ends with the server's pid), 0 when none.
func (c *cluster) leaderPID(ctx context.Context) int {
	l, err := lease.Observe(ctx, c.etcd.Client(), "/ax/elect/region/"+c.region)
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(l.Value, '/')
	pid, _ := strconv.Atoi(l.Value[i+1:])
	return pid
}

func (c *cluster) waitLeader(within time.Duration, not int) (int, time.Duration) {
	c.t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		pid := c.leaderPID(ctx)
		cancel()
		if pid != 0 && pid != not {
			return pid, time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader other than pid %d within %v", not, within)
	return 0, 0
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", within, what)
	return 0
}

func (c *cluster) waitReady(p *proc) {
	c.t.Helper()
	waitUntil(c.t, 20*time.Second, p.name+" /readyz", func() bool {
		resp, err := http.Get(p.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// submit puts tasks straight into the store (the API is tested elsewhere).
func (c *cluster) submit(n int, mod func(*task.Spec)) []string {
	c.t.Helper()
	var ids []string
	for done := 0; done < n; done += queue.MaxBatch {
		var batch []queue.NewTask
		for i := done; i < min(n, done+queue.MaxBatch); i++ {
			sp := &task.Spec{Type: "noop", Tags: map[string]string{"class": "cpu"}}
			if mod != nil {
				mod(sp)
			}
			if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
				c.t.Fatal(err)
			}
			batch = append(batch, queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true})
		}
		res, err := c.store.Submitter().Submit(context.Background(), batch...)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func (c *cluster) counts() *queue.Counts {
	c.t.Helper()
	cn, err := c.store.Tasks().Counts(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return cn
}

func metric(t *testing.T, api, name string) float64 {
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	total := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total
}

var _ = json.Marshal

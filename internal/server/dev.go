package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	miniserver "github.com/alicebob/miniredis/v2/server"
	"github.com/ax-sched/ax/configs"
	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/redisproc"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// DevOptions say how RunDev runs.
type DevOptions struct {
	Dir   string // state directory (etcd data, Redis files)
	Port  int    // API port of the first region, the others the next ones; 0: any free ports
	Slots int    // slots of each demo worker, at most its pool's slots
	Demo  bool   // a worker for every pool
	// AnyPortIfBusy: when Port's ports are taken, the APIs take free ones
	// (Dev.PortsBusy says so) instead of failing.
	AnyPortIfBusy bool
	// Auth turns auth on in every region with an admin token made for this
	// run (Dev.Token) and a cluster token of its own.
	Auth bool
	Load []config.Option // the configs' Load options (SIGHUP re-reads them)
	// Started, when not nil, is called once everything runs.
	Started func(Dev)
}

// Dev is what RunDev started.
type Dev struct {
	Dir     string // absolute
	Etcd    string // the embedded etcd's client URL
	Regions []DevRegion
	// PortsBusy names the API ports asked for that were taken ("8080-8082"),
	// when the APIs took free ones instead; else empty.
	PortsBusy string
	// Token is the admin token of this run with DevOptions.Auth; else empty.
	Token string
}

// DevRegion is one region of Dev.
type DevRegion struct {
	Name, API, Redis string
	// RedisBusy is the config's Redis address when another process held
	// it and the region's Redis took a free port (Redis); else empty.
	RedisBusy string
	Pools     []string // sorted
}

// RunDev runs cfgs (DevConfigs) on this machine until ctx ends: an
// embedded etcd, one Redis per region (redis-server, else an in-process
// miniredis), each region's server with auth off and, with Demo, a worker
// for every pool. SIGHUP re-reads the built-in configs into the servers.
func RunDev(ctx context.Context, cfgs []*config.Region, o DevOptions, log *slog.Logger) error {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	abs, _ := filepath.Abs(o.Dir)
	lock, err := lockDevDir(abs)
	if err != nil {
		return err
	}
	defer lock.unlock()
	// Bind every API port before etcd and Redis pick their free ports, so
	// they cannot take one of ours. Port 0 lets the kernel choose each.
	lns, busy, err := listenDev(o.Port, len(cfgs), o.AnyPortIfBusy)
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range lns {
			if l != nil {
				_ = l.Close()
			}
		}
	}()
	etcd, endpoint, err := startDevEtcd(abs, false)
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	if ctx.Err() != nil {
		etcd.Close()
		return interrupted(log)
	}
	defer etcd.Close()
	d := &devRun{opts: o, log: log, errc: make(chan error, 32)}
	info := Dev{Dir: abs, Etcd: endpoint, PortsBusy: busy}
	if o.Auth {
		if d.auth, info.Token, err = devAuth(); err != nil {
			return err
		}
	}
	defer d.stopRedis()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go d.reloadOnHUP(runCtx)
	for i, cfg := range cfgs {
		asked := cfg.Redis.Addr
		r, err := d.startRegion(ctx, runCtx, cfg, abs, endpoint, lns[i])
		lns[i] = nil // the server owns it now
		if err != nil {
			if ctx.Err() != nil {
				return interrupted(log)
			}
			return err
		}
		dr := DevRegion{Name: cfg.Name, API: cfg.PublicAddr, Redis: r.addr, Pools: poolList(cfg)}
		if r.addr != asked {
			dr.RedisBusy = asked
		}
		info.Regions = append(info.Regions, dr)
	}
	if !o.Auth {
		log.Warn("ax dev: auth is OFF for every region (configs/dev); never expose these ports")
	}
	if o.Started != nil {
		o.Started(info)
	}
	select {
	case <-ctx.Done():
	case err = <-d.errc:
		log.Error("ax dev: a component failed; stopping", "err", err)
	}
	cancel()
	d.wg.Wait()
	return err
}

// devRun is RunDev's state: what it started, for SIGHUP and for the stop.
type devRun struct {
	opts DevOptions
	log  *slog.Logger
	errc chan error
	wg   sync.WaitGroup
	reds []*devRedis
	auth *config.Auth // with DevOptions.Auth, every region's

	mu      sync.Mutex // servers, read by the SIGHUP loop
	servers []*Server
}

// reloadOnHUP re-reads the configs into the servers on SIGHUP until ctx
// ends: a closed terminal, or an operator, never ends ax dev.
func (d *devRun) reloadOnHUP(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			d.mu.Lock()
			reloadDev(d.servers, d.log, d.opts.Load...)
			d.mu.Unlock()
		}
	}
}

// startRegion starts cfg's Redis (ctx ends the wait for it), its server on
// ln and its demo workers, which run until runCtx ends.
func (d *devRun) startRegion(ctx, runCtx context.Context, cfg *config.Region, dir, etcd string, ln net.Listener) (*devRedis, error) {
	port, _ := strconv.Atoi(cfg.Redis.Addr[strings.LastIndexByte(cfg.Redis.Addr, ':')+1:])
	r, err := startDevRedis(ctx, filepath.Join(dir, cfg.Name), port, d.log)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("redis for %s: %w", cfg.Name, err)
	}
	d.reds = append(d.reds, r)
	cfg.Redis.Addr = r.addr
	cfg.Etcd.Regional.Endpoints = []string{etcd}
	cfg.Etcd.Global = cfg.Etcd.Regional
	cfg.Etcd.SessionTTL = 3 * time.Second
	cfg.Listen = ln.Addr().String()
	cfg.PublicAddr = "http://" + cfg.Listen
	cfg.Auth.Enabled = false
	if d.auth != nil {
		cfg.Auth.Enabled, cfg.Auth.ClusterToken, cfg.Auth.Tokens = true, d.auth.ClusterToken, d.auth.Tokens
	}
	cfg.Worker.Concurrency = d.opts.Slots
	cfg.Worker.ShutdownGrace = 5 * time.Second
	// One registry per region: its API exports its own region's series
	// only, its workers' included.
	reg := NewRegistry()
	wm := WorkerMetrics(cfg, reg)
	s, err := Start(runCtx, cfg, ln, reg, d.log)
	if err != nil {
		return nil, fmt.Errorf("server for %s: %w", cfg.Name, err)
	}
	d.mu.Lock()
	d.servers = append(d.servers, s)
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := s.Run(runCtx); err != nil {
			d.errc <- err
		}
	}()
	for _, p := range cfg.Pools {
		if !d.opts.Demo {
			break
		}
		// A worker offering more slots than its pool has would run more
		// than placement counts on (and the leader warns of it at every
		// start).
		wcfg := *cfg
		wcfg.Worker.Concurrency = min(d.opts.Slots, p.Slots)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := RunWorker(runCtx, &wcfg, p, "dev-"+cfg.Name+"-"+p.Name, wm, d.log); err != nil && runCtx.Err() == nil {
				d.errc <- fmt.Errorf("worker %s/%s: %w", cfg.Name, p.Name, err)
			}
		}()
	}
	return r, nil
}

func (d *devRun) stopRedis() {
	for _, r := range d.reds {
		r.stop()
	}
}

type devRedis struct {
	addr string
	srv  *redisproc.Server
	mini *miniredis.Miniredis
}

func (r *devRedis) stop() {
	if r.mini != nil {
		r.mini.Close()
	}
	if r.srv != nil {
		r.srv.Stop()
	}
}

// interrupted is RunDev's answer to a Ctrl-C before everything ran: a
// clean stop, not a failure (what was started is stopped by the caller's
// defers).
func interrupted(log *slog.Logger) error {
	log.Info("ax dev: interrupted during start-up; stopped")
	return nil
}

// devAuth is the auth section of every region with DevOptions.Auth: an
// admin token and a cluster token, each 32 random bytes in hex; token is
// the admin's, in clear.
func devAuth() (a *config.Auth, token string, err error) {
	b := make([]byte, 64)
	if _, err := rand.Read(b); err != nil {
		return nil, "", err
	}
	token = hex.EncodeToString(b[:32])
	sum := sha256.Sum256([]byte(token))
	return &config.Auth{Enabled: true, ClusterToken: hex.EncodeToString(b[32:]),
		Tokens: []config.Token{{Name: "ax-dev-admin", TokenSHA256: hex.EncodeToString(sum[:]), Role: "admin"}}}, token, nil
}

// listenDev binds n API listeners on 127.0.0.1: port, port+1, ... or, when
// port is 0, n ports the kernel chooses. When one of those is taken and
// anyIfBusy, it binds n free ports instead and busy names the ones asked
// for ("8080-8082").
func listenDev(port, n int, anyIfBusy bool) (lns []net.Listener, busy string, err error) {
	lns, err = listenPorts(port, n)
	if err != nil && anyIfBusy && port != 0 {
		busy = fmt.Sprintf("%d-%d", port, port+n-1)
		lns, err = listenPorts(0, n)
	}
	return lns, busy, err
}

func listenPorts(port, n int) ([]net.Listener, error) {
	var lns []net.Listener
	for i := 0; i < n; i++ {
		addr := "127.0.0.1:0"
		if port != 0 {
			addr = "127.0.0.1:" + strconv.Itoa(port+i)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("ax dev: API port: %w (use --port to pick others, 0 for any)", err)
		}
		lns = append(lns, l)
	}
	return lns, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// startDevRedis starts redis-server on port (or a free one) in dir, or an
// in-process miniredis when redis-server is not installed. It returns once
// the server has loaded what an earlier run left in dir, which takes a
// while after a big run; ctx (Ctrl-C) ends the wait.
func startDevRedis(ctx context.Context, dir string, port int, log *slog.Logger) (*devRedis, error) {
	if !portFree(port) {
		port = 0 // redisproc picks a free one
	}
	srv, err := redisproc.Start(ctx, redisproc.WithDir(dir), redisproc.WithPort(port),
		redisproc.WithAOF("everysec"), redisproc.WithLogger(log))
	if errors.Is(err, redisproc.ErrNotFound) {
		m := miniredis.NewMiniRedis()
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		if err := m.StartAddr("127.0.0.1:" + strconv.Itoa(port)); err != nil {
			return nil, err
		}
		// ax's servers check Redis's eviction policy (CONFIG GET
		// maxmemory-policy); miniredis has no CONFIG, so ax dev without
		// redis-server stopped at once ("unknown command `config`").
		if err := m.Server().Register("CONFIG", miniConfig); err != nil {
			m.Close()
			return nil, err
		}
		log.Warn("redis-server not found: using an in-process Redis-compatible server (miniredis). " +
			"It is for trying ax out only: no persistence, no real Redis semantics under load. Install redis-server for anything else.")
		return &devRedis{addr: m.Addr(), mini: m}, nil
	}
	if err != nil {
		return nil, err
	}
	return &devRedis{addr: srv.Addr(), srv: srv}, nil
}

// miniConfig answers CONFIG GET maxmemory-policy as a real Redis set up
// for ax would: noeviction (miniredis never evicts).
func miniConfig(c *miniserver.Peer, _ string, args []string) {
	if len(args) == 2 && strings.EqualFold(args[0], "GET") && args[1] == "maxmemory-policy" {
		c.WriteMapLen(1)
		c.WriteBulk("maxmemory-policy")
		c.WriteBulk("noeviction")
		return
	}
	c.WriteError("ERR ax dev's in-process Redis answers CONFIG GET maxmemory-policy only")
}

// StartEtcd starts an embedded etcd keeping its data in dir/etcd (an
// earlier run's is removed) on free ports; stop closes it.
func StartEtcd(dir string) (endpoint string, stop func(), err error) {
	e, endpoint, err := startDevEtcd(dir, true)
	if err != nil {
		return "", nil, err
	}
	return endpoint, e.Close, nil
}

// startDevEtcd starts the embedded etcd on free ports, trying again when a
// port was taken between choosing and binding it. With fresh, an earlier
// run's data in dir/etcd is removed first; without, etcd carries on with
// it (schedules, live overrides, and a revision, hence fencing tokens,
// above every one it handed out before).
func startDevEtcd(dir string, fresh bool) (e *embed.Etcd, endpoint string, err error) {
	if fresh {
		if err := os.RemoveAll(filepath.Join(dir, "etcd")); err != nil {
			return nil, "", err
		}
	}
	for attempt := 0; attempt < 3; attempt++ {
		if e, endpoint, err = startDevEtcdOnce(dir); err == nil {
			return e, endpoint, nil
		}
	}
	return nil, "", err
}

// ax dev's etcd holds a few schedules and overrides: 4 MB WAL segments
// instead of etcd's preallocated 64 MB.
func init() { wal.SegmentSizeBytes = 4 << 20 }

func startDevEtcdOnce(dir string) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cp, err := freePort()
	if err != nil {
		return nil, "", err
	}
	pp, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(cp))
	pu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(pp))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, "", errors.New("embedded etcd did not become ready")
	}
	return e, cu.String(), nil
}

// DevConfigs reads configs/dev (embedded in the binary) with the Load
// options opts.
func DevConfigs(opts ...config.Option) ([]*config.Region, error) {
	names, err := fs.Glob(configs.Dev, "dev/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*config.Region
	for _, n := range names {
		b, err := configs.Dev.ReadFile(n)
		if err != nil {
			return nil, err
		}
		cfg, err := config.Parse("configs/"+n, b, opts...)
		if err != nil {
			return nil, err
		}
		out = append(out, cfg)
	}
	// us-east-1 first: it gets the first port, the CLI's default.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name == "us-east-1" })
	return out, nil
}

// reloadDev re-reads the built-in configs into the running servers
// (SIGHUP); one during start-up reaches the servers started by then.
func reloadDev(servers []*Server, log *slog.Logger, opts ...config.Option) {
	cfgs, err := DevConfigs(opts...)
	if err != nil {
		log.Error("SIGHUP: config not reloaded", "err", err)
		return
	}
	for _, s := range servers {
		for _, c := range cfgs {
			if c.Name == s.cfg.Name {
				// What RunDev replaced in the files stays as it runs.
				c.Redis, c.Etcd, c.Listen, c.PublicAddr, c.Auth, c.Worker = s.cfg.Redis, s.cfg.Etcd, s.cfg.Listen, s.cfg.PublicAddr, s.cfg.Auth, s.cfg.Worker
				s.Reload(c)
			}
		}
	}
}

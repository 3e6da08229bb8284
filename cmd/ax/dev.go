package main

import (
	"context"
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
	"github.com/ax-sched/ax/worker/handlers"
	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func newDevCmd() *cobra.Command {
	var dir string
	var tmp bool
	var apiPort int
	var workers int
	var noDemo bool
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run everything on this machine: embedded etcd, one Redis per region, three regions with leaders, workers and the API",
		Long: `ax dev starts, in one process, an embedded etcd, one Redis per region (real
redis-server child processes when redis-server is on PATH, else an in-process
Redis-compatible server that is for trying ax out only), the three regions of
configs/dev (AWS-, GCP- and Azure-like, example prices), a worker for every
pool with the noop, sleep and demo exec handlers (none with
--no-demo-workers: run your own, see the README), and the API on
127.0.0.1:8080 with auth OFF. Ctrl-C stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Its workers run commands: as `ax worker` does
			// (handlers.SealProcess); its configs still read the
			// environment, so nothing is unset.
			if _, err := handlers.SealProcess(); err != nil {
				return err
			}
			if tmp {
				d, err := os.MkdirTemp("", "ax-dev-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				dir = d
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDev(ctx, dir, apiPort, workers, !noDemo, cmd.OutOrStdout(), loadOptions(cmd.Root()))
		},
	}
	c.Flags().StringVar(&dir, "dir", ".ax-dev", "state directory (etcd data, Redis files)")
	c.Flags().BoolVar(&tmp, "tmp", false, "keep state in a temporary directory, removed on exit")
	c.Flags().IntVar(&apiPort, "port", 8080, "API port of the first region; the others take the next ports (0: any free ports, printed at start)")
	c.Flags().IntVar(&workers, "worker-slots", 4, "slots of each dev worker (one worker per pool), at most its pool's slots")
	c.Flags().BoolVar(&noDemo, "no-demo-workers", false, "start no worker: pools have no slots until you run your own (README: your own handler)")
	return c
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

// listenDev binds n API listeners on 127.0.0.1: port, port+1, ... or, when
// port is 0, n ports the kernel chooses.
func listenDev(port, n int) ([]net.Listener, error) {
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

// startDevEtcd starts the embedded etcd on free ports, trying again when a
// port was taken between choosing and binding it.
func startDevEtcd(dir string) (e *embed.Etcd, endpoint string, err error) {
	for attempt := 0; attempt < 3; attempt++ {
		if e, endpoint, err = startDevEtcdOnce(dir); err == nil {
			return e, endpoint, nil
		}
	}
	return nil, "", err
}

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
	// A data dir from an earlier run holds another peer URL: start fresh.
	_ = os.RemoveAll(cfg.Dir)
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

// devConfigs reads configs/dev (embedded in the binary).
func devConfigs(opts ...config.Option) ([]*config.Region, error) {
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
func reloadDev(servers []*server, log *slog.Logger, opts ...config.Option) {
	cfgs, err := devConfigs(opts...)
	if err != nil {
		log.Error("SIGHUP: config not reloaded", "err", err)
		return
	}
	for _, s := range servers {
		for _, c := range cfgs {
			if c.Name == s.cfg.Name {
				s.reload(c)
			}
		}
	}
}

// opts are the configs' Load options (loadOptions).
func runDev(ctx context.Context, dir string, apiPort, slots int, demo bool, stdout interface{ Write([]byte) (int, error) }, opts ...config.Option) error {
	log := newLogger(slog.LevelInfo)
	cfgs, err := devConfigs(opts...)
	if err != nil {
		return usageErr(err) // the environment's problems: the files are ax's own
	}
	warnIgnoredEnv(log, cfgs[0]) // the same environment for every region
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, _ := filepath.Abs(dir)
	// Bind every API port before etcd and Redis pick their free ports, so
	// they cannot take one of ours. Port 0 lets the kernel choose each.
	lns, err := listenDev(apiPort, len(cfgs))
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
	etcd, endpoint, err := startDevEtcd(abs)
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	defer etcd.Close()
	var reds []*devRedis
	defer func() {
		for _, r := range reds {
			r.stop()
		}
	}()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// SIGHUP (a closed terminal, or an operator) never ends ax dev: as in
	// ax server it reloads what can be reloaded, here from the built-in
	// configs.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var (
		mu      sync.Mutex // servers, read by the SIGHUP loop
		servers []*server
	)
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-hup:
				mu.Lock()
				reloadDev(servers, log, opts...)
				mu.Unlock()
			}
		}
	}()
	var wg sync.WaitGroup
	errc := make(chan error, 32)
	var lines []string
	for i, cfg := range cfgs {
		port, _ := strconv.Atoi(cfg.Redis.Addr[strings.LastIndexByte(cfg.Redis.Addr, ':')+1:])
		r, err := startDevRedis(ctx, filepath.Join(abs, cfg.Name), port, log)
		if err != nil {
			return fmt.Errorf("redis for %s: %w", cfg.Name, err)
		}
		reds = append(reds, r)
		cfg.Redis.Addr = r.addr
		cfg.Etcd.Regional.Endpoints = []string{endpoint}
		cfg.Etcd.Global = cfg.Etcd.Regional
		cfg.Etcd.SessionTTL = 3 * time.Second
		cfg.Listen = lns[i].Addr().String()
		cfg.PublicAddr = "http://" + cfg.Listen
		cfg.Auth.Enabled = false
		cfg.Worker.Concurrency = slots
		cfg.Worker.ShutdownGrace = 5 * time.Second
		// One registry per region: its API exports its own region's
		// series only, its workers' included.
		reg := newRegistry()
		wm := workerMetrics(cfg, reg)
		s, err := startServer(runCtx, cfg, lns[i], reg, log)
		lns[i] = nil // the server owns it now
		if err != nil {
			return fmt.Errorf("server for %s: %w", cfg.Name, err)
		}
		mu.Lock()
		servers = append(servers, s)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(runCtx); err != nil {
				errc <- err
			}
		}()
		for _, p := range cfg.Pools {
			if !demo {
				break // --no-demo-workers
			}
			// A worker offering more slots than its pool has would run
			// more than placement counts on (and the leader warns of it
			// at every start: eastus's gpu-a100 has 2).
			wcfg := *cfg
			wcfg.Worker.Concurrency = min(slots, p.Slots)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := runWorker(runCtx, &wcfg, p, "dev-"+cfg.Name+"-"+p.Name, wm, log); err != nil && runCtx.Err() == nil {
					errc <- fmt.Errorf("worker %s/%s: %w", cfg.Name, p.Name, err)
				}
			}()
		}
		lines = append(lines, fmt.Sprintf("  %-13s API %-22s Redis %-16s pools: %s", cfg.Name, cfg.PublicAddr, r.addr, poolNames(cfg)))
	}
	log.Warn("ax dev: auth is OFF for every region (configs/dev); never expose these ports")
	if !demo {
		lines = append(lines, "  no workers (--no-demo-workers): run your own, e.g.\n"+
			"  go run ./examples/customhandler --redis "+reds[0].addr+" --region "+cfgs[0].Name+" --pool cpu-spot")
	}
	fmt.Fprintf(stdout, `
ax dev is running (state in %s):
  etcd          %s (embedded)
%s
  dashboard     %s/

Try next:
%s
Ctrl-C stops everything.
`, abs, endpoint, strings.Join(lines, "\n"), cfgs[0].PublicAddr, devHints(cfgs[0].PublicAddr))
	select {
	case <-ctx.Done():
	case err = <-errc:
		log.Error("ax dev: a component failed; stopping", "err", err)
	}
	cancel()
	wg.Wait()
	fmt.Fprintln(stdout, "ax dev stopped.")
	return err
}

// defaultAPI is the CLI's --api default: ax dev's first region on its
// default port.
const defaultAPI = "http://127.0.0.1:8080"

// devHints are the commands ax dev suggests, aimed at its first region's
// API: on another port (--port) they name it, or they would reach
// whatever listens on 8080.
func devHints(api string) string {
	flag := ""
	if api != defaultAPI {
		flag = " --api " + api
	}
	var b strings.Builder
	for _, c := range []string{"submit --type noop --tag class=spot", "regions", "explain --type sleep --tag gpu=a100"} {
		b.WriteString("  go run ./cmd/ax" + flag + " " + c + "\n")
	}
	return b.String()
}

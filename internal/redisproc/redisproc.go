package redisproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotFound is returned by Start when the redis-server binary is not on
// PATH.
var ErrNotFound = errors.New("redisproc: redis-server not found on PATH")

// Option configures Start.
type Option func(*config)

type config struct {
	bin        string
	dir        string
	port       int
	fsync      string // "" = no append-only file
	password   string
	cluster    bool
	sentinel   bool
	directives []string
	log        *slog.Logger
	stopGrace  time.Duration
	// launch builds the command; tests swap in the watchdog launcher.
	launch func(bin string, args ...string) (*exec.Cmd, io.Closer, error)
}

// WithBinary runs bin instead of "redis-server" (looked up on PATH).
func WithBinary(bin string) Option { return func(c *config) { c.bin = bin } }

// WithDir keeps the server's files (redis.conf, redis.log, the append-only
// file, nodes.conf) in dir, created if missing and left in place by Stop.
// Without it the server gets a temporary directory that Stop removes.
func WithDir(dir string) Option { return func(c *config) { c.dir = dir } }

// WithPort binds exactly port. Without it Start picks a free port, and picks
// again when another process took it first.
func WithPort(port int) Option { return func(c *config) { c.port = port } }

// WithAOF turns on the append-only file with the given appendfsync policy:
// "always" (a restart keeps every acknowledged write), "everysec" or "no".
// Without it the server keeps nothing on disk (no AOF, no snapshots).
func WithAOF(fsync string) Option { return func(c *config) { c.fsync = fsync } }

// WithPassword sets requirepass; the readiness probe authenticates with it.
func WithPassword(pw string) Option { return func(c *config) { c.password = pw } }

// WithCluster starts the server with cluster-enabled yes (nodes.conf in its
// directory). Forming the cluster (redis-cli --cluster create) is the
// caller's job.
func WithCluster() Option { return func(c *config) { c.cluster = true } }

// WithSentinel runs the server as a Sentinel (redis-server --sentinel);
// the "sentinel monitor ..." and other sentinel directives come with
// WithConfig. Sentinel rewrites its config file as it learns, in the
// server's directory.
func WithSentinel() Option { return func(c *config) { c.sentinel = true } }

// WithConfig adds redis.conf directives ("name value ..."), written after
// the package's own, so they override them.
func WithConfig(directives ...string) Option {
	return func(c *config) { c.directives = append(c.directives, directives...) }
}

// WithLogger receives a line when the server is found loading its dataset
// (the wait can be long) and when a port was taken.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithStopGrace is how long Stop waits after SIGTERM before SIGKILL
// (default 10 s: a server with an append-only file fsyncs it on SIGTERM).
func WithStopGrace(d time.Duration) Option { return func(c *config) { c.stopGrace = d } }

// Server is a running redis-server child. Its methods are safe for
// concurrent use.
type Server struct {
	cfg     config
	addr    string
	port    int
	tempDir bool

	cmd    *exec.Cmd
	stdin  io.Closer     // the watchdog's pipe, where there is one
	done   chan struct{} // closed once the child has been reaped
	waited error         // cmd.Wait's result, set before done is closed

	stopOnce sync.Once
}

// Start starts a redis-server and waits until it is usable, until it exits,
// or until ctx ends. A server loading a large dataset is waited for as long
// as ctx allows; give ctx a deadline.
//
// It returns only once the server is usable: it answers PING with PONG,
// which a Redis still loading its append-only file or snapshot does not (it
// answers LOADING, for seconds with a large dataset), and the answer comes
// from this child and not from another server on the port. Stop ends it with
// SIGTERM, then SIGKILL after a grace period, and waits until it is gone, so
// a new server can start on the same port and directory right after.
//
// The child dies with its parent even if the parent is killed: on Linux by
// the kernel's parent-death signal, elsewhere by a shell watchdog (see
// proc_bsd.go). It runs in its own process group, so a Ctrl-C in the
// parent's terminal does not reach it: its owner stops it, in order.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	cfg := config{bin: "redis-server", stopGrace: 10 * time.Second, launch: launch}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if _, err := exec.LookPath(cfg.bin); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	tempDir := cfg.dir == ""
	if tempDir {
		d, err := os.MkdirTemp("", "redisproc-")
		if err != nil {
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		cfg.dir = d
	} else if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	dir, err := filepath.Abs(cfg.dir)
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	cfg.dir = dir
	s, err := startRetrying(ctx, cfg)
	if err != nil {
		if tempDir {
			_ = os.RemoveAll(cfg.dir)
		}
		return nil, err
	}
	s.tempDir = tempDir
	return s, nil
}

// startRetrying tries free ports until one start works (at most five): a
// port that was free when chosen can be taken before redis-server binds it.
func startRetrying(ctx context.Context, cfg config) (*Server, error) {
	if cfg.port != 0 {
		return startOnce(ctx, cfg, cfg.port)
	}
	var err error
	for range 5 {
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		var s *Server
		if s, err = startOnce(ctx, cfg, port); err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		cfg.log.Warn("redisproc: start failed; trying another port", "port", port, "err", err)
	}
	return nil, err
}

func startOnce(ctx context.Context, cfg config, port int) (*Server, error) {
	conf := filepath.Join(cfg.dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(cfg.conf(port)), 0o600); err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	args := []string{conf}
	if cfg.sentinel {
		args = append(args, "--sentinel")
	}
	cmd, stdin, err := cfg.launch(cfg.bin, args...)
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	s := &Server{cfg: cfg, port: port, addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() { s.waited = cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx, conf); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

// conf is the redis.conf of one start.
func (c *config) conf(port int) string {
	lines := []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + quote(c.dir),
		"logfile " + quote(c.logPath()),
		"daemonize no",
		// Snapshots off: ax's durability is the AOF (or nothing, for tests
		// and benches that do not restart).
		`save ""`,
		// ax requires noeviction of every Redis: an evicted task is lost.
		"maxmemory-policy noeviction",
	}
	if c.fsync != "" {
		lines = append(lines, "appendonly yes", "appendfsync "+c.fsync)
	} else {
		lines = append(lines, "appendonly no")
	}
	if c.password != "" {
		lines = append(lines, "requirepass "+quote(c.password))
	}
	if c.cluster {
		lines = append(lines, "cluster-enabled yes", "cluster-config-file nodes.conf")
	}
	lines = append(lines, c.directives...)
	return strings.Join(lines, "\n") + "\n"
}

func (c *config) logPath() string { return filepath.Join(c.dir, "redis.log") }

// quote writes s as a redis.conf string: double quotes, and \xHH for quotes,
// backslashes and anything not printable ASCII.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\' {
			fmt.Fprintf(&b, `\x%02x`, ch)
			continue
		}
		b.WriteByte(ch)
	}
	b.WriteByte('"')
	return b.String()
}

// waitReady polls the server until it is usable: it answers PING with PONG
// (not LOADING) and INFO names this start's config file, so a PONG from
// another server that held the port does not count.
func (s *Server) waitReady(ctx context.Context, conf string) error {
	loggedLoading := false
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := probe(ctx, s.addr, s.cfg.password, conf)
		switch {
		case err != nil:
			return fmt.Errorf("redisproc: redis-server on %s: %w", s.addr, err)
		case st == ready:
			return nil
		case st == loading && !loggedLoading:
			loggedLoading = true
			s.cfg.log.Info("redis-server is loading its dataset; waiting until it is done", "addr", s.addr, "dir", s.cfg.dir)
		}
		select {
		case <-s.done:
			return fmt.Errorf("redisproc: redis-server on %s exited (%v): %s", s.addr, s.waited, s.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("redisproc: redis-server on %s not ready (%s): %w; log: %s", s.addr, st, context.Cause(ctx), s.LogTail())
		case <-tick.C:
		}
	}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// Dir is the server's data directory (absolute).
func (s *Server) Dir() string { return s.cfg.dir }

// Done is closed once the child process has exited and been reaped.
func (s *Server) Done() <-chan struct{} { return s.done }

// LogTail is the end of the server's log file, for error messages.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(s.cfg.logPath())
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}

// Signal sends sig to the server's process group (SIGSTOP and SIGCONT pause
// and resume it).
func (s *Server) Signal(sig syscall.Signal) error {
	select {
	case <-s.done:
		return os.ErrProcessDone
	default:
	}
	return signalGroup(s.cmd.Process.Pid, sig)
}

// Stop ends the server: SIGTERM (and SIGCONT, should it be paused; on
// Windows SIGKILL at once), then SIGKILL after the grace period; it returns
// once the process is gone, and removes a temporary directory. Safe to call
// more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
		default:
			_ = terminate(s.cmd.Process.Pid)
		}
		select {
		case <-s.done:
		case <-time.After(s.cfg.stopGrace):
			_ = s.Signal(syscall.SIGKILL)
			<-s.done
		}
		s.cleanup()
	})
}

// Kill ends the server with SIGKILL (no AOF fsync, as a crash would) and
// waits until it is gone. Safe to call more than once, and after Stop.
func (s *Server) Kill() {
	s.stopOnce.Do(func() {
		_ = s.Signal(syscall.SIGKILL)
		<-s.done
		s.cleanup()
	})
}

func (s *Server) cleanup() {
	if s.stdin != nil {
		_ = s.stdin.Close()
	}
	if s.tempDir {
		_ = os.RemoveAll(s.cfg.dir)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

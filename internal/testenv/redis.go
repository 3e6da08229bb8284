// Package testenv starts the real servers tests run against: redis-server
// processes on free ports and an in-process etcd (embed). Nothing is mocked.
// A missing redis-server binary fails the test loudly; it never skips.
package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions tune a test Redis.
type RedisOptions struct {
	// AOFAlways turns on the append-only file with appendfsync always, so a
	// restart keeps every acknowledged write.
	AOFAlways bool
	// Extra are additional config directives ("name value").
	Extra []string
	// Password, when set, is required of every client (requirepass);
	// Client and Flush use it.
	Password string
}

// Redis is a redis-server child process owned by a test.
type Redis struct {
	t    testing.TB
	dir  string
	port int
	opts RedisOptions

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been reaped
}

// FreePort returns a TCP port that was free a moment ago on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartRedis starts a redis-server on a free port in a temp dir. It is
// stopped with t.Cleanup.
func StartRedis(t testing.TB, opts ...RedisOptions) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testenv: redis-server not found on PATH (run `make test`, which installs it): %v", err)
	}
	_ = bin
	r := &Redis{t: t, dir: t.TempDir()}
	if len(opts) > 0 {
		r.opts = opts[0]
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		r.port = FreePort(t)
		if lastErr = r.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("testenv: start redis: %v", lastErr)
	}
	t.Cleanup(r.Stop)
	return r
}

func (r *Redis) start() error {
	conf := []string{
		"port " + strconv.Itoa(r.port),
		"bind 127.0.0.1",
		"dir " + r.dir,
		"save \"\"",
		"maxmemory-policy noeviction",
		"daemonize no",
		"loglevel warning",
		"logfile " + filepath.Join(r.dir, "redis.log"),
	}
	if r.opts.AOFAlways {
		conf = append(conf, "appendonly yes", "appendfsync always")
	} else {
		conf = append(conf, "appendonly no")
	}
	if r.opts.Password != "" {
		conf = append(conf, "requirepass "+r.opts.Password)
	}
	conf = append(conf, r.opts.Extra...)
	cfg := filepath.Join(r.dir, "redis.conf")
	if err := os.WriteFile(cfg, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	cmd := exec.Command("redis-server", cfg)
	// Own process group, so a test's kill reaches only this server, and
	// Pdeathsig so a crashed test binary does not leave it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	reaped := make(chan struct{})
	go func() { done <- cmd.Wait(); close(reaped) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("redis-server exited: %v: %s", err, r.log())
		default:
		}
		c, err := net.DialTimeout("tcp", r.Addr(), 100*time.Millisecond)
		if err == nil {
			req := "PING\r\n"
			if pw := r.opts.Password; pw != "" {
				req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(pw), pw) + req
			}
			_, _ = c.Write([]byte(req))
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			br := bufio.NewReader(c)
			line, _ := br.ReadString('\n')
			if r.opts.Password != "" && strings.HasPrefix(line, "+OK") {
				line, _ = br.ReadString('\n')
			}
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				r.mu.Lock()
				r.cmd, r.done = cmd, reaped
				r.mu.Unlock()
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-reaped
	return fmt.Errorf("redis-server did not answer on %s: %s", r.Addr(), r.log())
}

func (r *Redis) log() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
	return strings.TrimSpace(string(b))
}

// Addr is host:port of the server.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// Dir is the server's data directory.
func (r *Redis) Dir() string { return r.dir }

// Client returns a new go-redis client, closed with t.Cleanup.
func (r *Redis) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.opts.Password, MaxRetries: -1})
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL and waits until the process is gone.
func (r *Redis) Kill() { r.signalAndWait(syscall.SIGKILL) }

// Stop shuts the server down (SIGTERM, then SIGKILL after 5 s). Safe to call twice.
func (r *Redis) Stop() { r.signalAndWait(syscall.SIGTERM) }

func (r *Redis) signalAndWait(sig syscall.Signal) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.cmd, r.done = nil, nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (r *Redis) Pause()  { r.signal(syscall.SIGSTOP) }
func (r *Redis) Resume() { r.signal(syscall.SIGCONT) }

func (r *Redis) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(sig)
	}
}

// Restart stops the server (SIGTERM, or SIGKILL when hard is true) and starts
// it again on the same port with the same data dir.
func (r *Redis) Restart(hard bool) {
	r.t.Helper()
	if hard {
		r.Kill()
	} else {
		r.Stop()
	}
	var err error
	for i := 0; i < 50; i++ {
		if err = r.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("testenv: restart redis: %v", err)
}

// Flush empties the server; handy between sub-tests.
func (r *Redis) Flush(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.opts.Password})
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

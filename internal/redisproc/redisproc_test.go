package redisproc

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func start(t *testing.T, opts ...Option) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func client(t *testing.T, s *Server, password string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: password, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func answers(addr string) bool {
	st, _ := probe(context.Background(), addr, "", "")
	return st != down
}

func TestStartStopRemovesTempDir(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	if err := client(t, s, "").Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop()
	s.Kill()
	select {
	case <-s.Done():
	default:
		t.Fatal("Stop returned before the process was reaped")
	}
	if answers(s.Addr()) {
		t.Fatalf("something still answers on %s after Stop", s.Addr())
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary dir %s left behind: %v", s.Dir(), err)
	}
}

// logRecorder keeps the messages a Server logs.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }
func (l *logRecorder) saw(prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// A restarted server with a big append-only file answers LOADING for a
// while (ax dev used to exit on it): Start returns only once it is usable,
// and the data is all there.
func TestRestartWaitsWhileLoadingAOF(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: half a million keys written and loaded; make test runs it")
	}
	const keys = 500_000
	dir := t.TempDir()
	// A RESP (not RDB-preamble) AOF loads slowest; DEBUG POPULATE plus a
	// rewrite writes it in a second instead of half a million round trips.
	opts := []Option{WithDir(dir), WithAOF("everysec"),
		WithConfig("aof-use-rdb-preamble no", "enable-debug-command yes")}
	s := start(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// DEBUG POPULATE blocks the server for seconds on a busy machine.
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, ReadTimeout: time.Minute})
	defer c.Close()
	if err := c.Do(ctx, "DEBUG", "POPULATE", keys, "key", 64).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.BgRewriteAOF(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") &&
			strings.Contains(info, "aof_last_bgrewrite_status:ok") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()

	rec := &logRecorder{}
	s2 := start(t, append(opts, WithPort(s.Port()), WithLogger(slog.New(rec)))...)
	// DBSIZE is refused while loading: it must work at once.
	n, err := client(t, s2, "").DBSize(ctx).Result()
	if err != nil {
		t.Fatalf("first command after Start: %v", err)
	}
	if n != keys {
		t.Fatalf("after restart: %d keys, want %d", n, keys)
	}
	// The test's premise: the restart did meet a loading server. If this
	// fails the dataset loads too fast here to exercise the wait.
	if !rec.saw("redis-server is loading") {
		t.Fatalf("Start never saw the server LOADING; make the dataset bigger (log: %s)", s2.LogTail())
	}
}

func TestPortTakenIsAnErrorNotTheOtherServer(t *testing.T) {
	a := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Start(ctx, WithPort(a.Port()))
	if err == nil {
		b.Stop()
		t.Fatalf("second server on port %d started", a.Port())
	}
	if err := client(t, a, "").Ping(ctx).Err(); err != nil {
		t.Fatalf("first server after the clash: %v", err)
	}
}

func TestPasswordAndCluster(t *testing.T) {
	s := start(t, WithPassword(`p"w \secret`), WithCluster())
	ctx := context.Background()
	if err := client(t, s, "").Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without password: %v, want NOAUTH", err)
	}
	info, err := client(t, s, `p"w \secret`).Info(ctx, "cluster").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "cluster_enabled:1") {
		t.Fatalf("cluster not enabled: %q", info)
	}
}

func TestSentinel(t *testing.T) {
	data := start(t)
	s := start(t, WithSentinel(), WithPassword("sentinel-pw"),
		WithConfig("sentinel monitor m 127.0.0.1 "+strconv.Itoa(data.Port())+" 1"))
	ctx := context.Background()
	info, err := client(t, s, "sentinel-pw").Info(ctx, "sentinel").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "sentinel_masters:1") || !strings.Contains(info, "address=127.0.0.1:"+strconv.Itoa(data.Port())) {
		t.Fatalf("not a sentinel monitoring the data server: %q", info)
	}
}

// The watchdog (how macOS and the BSDs tie the server to its parent) runs
// on Linux too: closing its stdin pipe, as the kernel does when the parent
// dies, ends redis-server; Stop and Signal work through the shell.
func TestWatchdog(t *testing.T) {
	wd := func(c *config) { c.launch = launchWatchdog }
	t.Run("stop", func(t *testing.T) {
		s := start(t, wd)
		ctx := context.Background()
		pid := redisPID(t, client(t, s, ""))
		if err := s.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
		defer stopped.Close()
		if err := stopped.Ping(ctx).Err(); err == nil {
			t.Fatal("PING answered while the group was stopped")
		}
		_ = s.Signal(syscall.SIGCONT)
		s.Stop()
		if processAlive(pid) {
			t.Fatalf("redis-server %d still runs after Stop returned", pid)
		}
	})
	t.Run("parent gone", func(t *testing.T) {
		s := start(t, wd)
		pid := redisPID(t, client(t, s, ""))
		_ = s.stdin.Close() // what the kernel does when the parent dies
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the watchdog did not end redis-server within 10 s of EOF")
		}
		deadline := time.Now().Add(5 * time.Second)
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if processAlive(pid) {
			t.Fatalf("redis-server %d outlived its watchdog", pid)
		}
	})
}

func redisPID(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, v, _ := strings.Cut(info, "process_id:")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(v, "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// processAlive: kill(pid, 0) succeeds for a running or zombie process;
// /proc tells a zombie apart where there is one.
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	return s[strings.LastIndexByte(s, ')')+2] != 'Z'
}

func TestStartClusterWithPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (a Redis Cluster of three processes): skipped under -short; `make test` runs it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, 3, 0, WithPassword("cl-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Password: "cl-pw"})
	defer cc.Close()
	masters := map[string]bool{}
	for i := range 20 {
		k := "k" + strconv.Itoa(i)
		if err := cc.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
		n, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[n.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("20 keys on %d masters, want 3", len(masters))
	}
}

package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Without redis-server on PATH, ax dev's in-process Redis passes the
// servers' start-up check (PING, CONFIG GET maxmemory-policy) and the
// probe of ax_redis_healthy: it failed with "unknown command `config`",
// so ax dev stopped at once where the README says it needs only Go.
func TestDevWithoutRedisServerPassesTheServersCheck(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server
	r, err := startDevRedis(context.Background(), t.TempDir(), 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	if r.mini == nil {
		t.Fatal("redis-server was found: the test needs the in-process fallback")
	}
	rdb, err := redisClient(config.Redis{Addr: r.addr}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	store, err := store.New(rdb, queue.Options{Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Ping(context.Background()); err != nil {
		t.Fatalf("the servers' check of ax dev's in-process Redis: %v", err)
	}
}

// A second start of ax dev's etcd on the same directory, on other ports,
// still holds the first run's keys, and its revision carries on above
// the first run's: fencing tokens (revisions) stay monotonic.
func TestDevEtcdKeepsItsDataAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	put := func(want string) (rev int64) {
		t.Helper()
		e, endpoint, err := startDevEtcd(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := cli.Get(ctx, "/ax/prices/us-east-1/cpu")
		if err != nil {
			t.Fatal(err)
		}
		if v := ""; len(got.Kvs) > 0 {
			v = string(got.Kvs[0].Value)
			if v != want {
				t.Fatalf("after the restart: %q, want %q", v, want)
			}
		} else if want != "" {
			t.Fatalf("after the restart: the key is gone, want %q", want)
		}
		r, err := cli.Put(ctx, "/ax/prices/us-east-1/cpu", `{"price_per_slot_hour":0.02}`)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	first := put("")
	second := put(`{"price_per_slot_hour":0.02}`)
	if second <= first {
		t.Fatalf("revision after the restart %d, not above the first run's %d", second, first)
	}
}

// A second lock of ax dev's directory fails at once, names the directory
// and the holder's pid, and leaves the lock file as it was; after unlock
// the directory can be locked again.
func TestDevDirLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDevDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, devLockName))
	_, err = lockDevDir(dir)
	if !errors.Is(err, ErrDevDirInUse) {
		t.Fatalf("second lock: %v, want ErrDevDirInUse", err)
	}
	pid := strconv.Itoa(os.Getpid())
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+pid) {
		t.Fatalf("second lock's error %q names neither %s nor pid %s", msg, dir, pid)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, devLockName)); string(after) != string(before) {
		t.Fatalf("the refused lock changed the file: %q, was %q", after, before)
	}
	l.unlock()
	l, err = lockDevDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l.unlock()
}

// A worker given a Redis nobody serves does not claim to have started: it
// says it has not connected yet and names redis.addr and where it came
// from.
func TestWorkerWithoutRedisSaysSo(t *testing.T) {
	cfgs, err := DevConfigs()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cfgs[0]
	cfg.Redis.Addr = "127.0.0.1:1"
	var buf lockedLog
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_ = RunWorker(ctx, cfg, cfg.Pools[0], "w-test", nil, slog.New(slog.NewTextHandler(&buf, nil)))
	out := buf.String()
	if strings.Contains(out, "ax worker started") {
		t.Errorf("the worker says it started without Redis:\n%s", out)
	}
	for _, want := range []string{"has not connected to Redis yet", "redis.addr=127.0.0.1:1", "from=" + cfg.Source()} {
		if !strings.Contains(out, want) {
			t.Errorf("the worker's log lacks %q:\n%s", want, out)
		}
	}
}

// lockedLog is a log sink the test reads while goroutines write.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

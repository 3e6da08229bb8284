package server

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/queue"
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
	rdb, err := redisClient(config.Redis{Addr: r.addr}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	store, err := queue.New(rdb, queue.Options{Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Ping(context.Background()); err != nil {
		t.Fatalf("the servers' check of ax dev's in-process Redis: %v", err)
	}
}

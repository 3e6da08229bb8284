package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/internal/redisproc"
	"github.com/ax-sched/ax/queue"
)

// Target says which Redis a run uses.
type Target struct {
	// Addr is a region's Redis (host:port). Empty: start a temporary
	// redis-server (RedisServer) and remove it afterwards.
	Addr     string
	Password string
	// RedisServer is the binary started when Addr is empty (default
	// "redis-server" on PATH).
	RedisServer string
	// Region and Prefix name the bench's keys (defaults "bench" and
	// "axbench"), so a run against a live Redis touches none of its data.
	Region, Prefix string
	// Pool is the pool tasks are submitted to and workers serve (default
	// "bench").
	Pool string
	// Keep leaves the bench's keys in an external Redis after the run.
	Keep bool
	// Log receives the workers' and the bench's own log lines (default:
	// errors to stderr).
	Log *slog.Logger
}

// Env is an open Target: a client, a store over it, and the temporary
// server when the bench started one.
type Env struct {
	Target Target
	rdb    *redis.Client
	srv    *redisproc.Server
	// Store is the region's task store as a worker process builds it.
	Store *queue.Store
}

// Open connects to t.Addr, or starts a temporary redis-server.
func Open(ctx context.Context, t Target) (*Env, error) {
	if t.Region == "" {
		t.Region = "bench"
	}
	if t.Prefix == "" {
		t.Prefix = "axbench"
	}
	if t.Pool == "" {
		t.Pool = "bench"
	}
	if t.RedisServer == "" {
		t.RedisServer = "redis-server"
	}
	if t.Log == nil {
		t.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	e := &Env{Target: t}
	addr := t.Addr
	if addr == "" {
		// No persistence: the bench measures the scheduler, not the disk;
		// the summary says so (RedisDescription).
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := redisproc.Start(sctx, redisproc.WithBinary(t.RedisServer))
		cancel()
		if errors.Is(err, redisproc.ErrNotFound) {
			return nil, fmt.Errorf("bench: %s not found on PATH: install Redis or pass --redis ADDR", t.RedisServer)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.srv, addr = s, s.Addr()
	}
	// Enough connections for every worker, submitter and the leader loop.
	e.rdb = redis.NewClient(&redis.Options{Addr: addr, Password: t.Password, PoolSize: 256, MaxRetries: -1})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.rdb.Ping(pctx).Err(); err != nil {
		e.Close()
		return nil, fmt.Errorf("bench: redis %s: %w", addr, err)
	}
	if err := e.clean(ctx); err != nil {
		e.Close()
		return nil, err
	}
	var err error
	e.Store, err = queue.New(e.rdb, queue.Options{Region: t.Region, Prefix: t.Prefix})
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Managed reports whether the bench started the Redis itself.
func (e *Env) Managed() bool { return e.srv != nil }

// Client is the Redis client every part of the run shares.
func (e *Env) Client() *redis.Client { return e.rdb }

// Addr is the Redis address.
func (e *Env) Addr() string { return e.rdb.Options().Addr }

// Close removes the bench's keys from an external Redis (unless Keep) or
// stops the temporary server.
func (e *Env) Close() {
	if e.rdb != nil && e.srv == nil && !e.Target.Keep {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := e.clean(ctx); err != nil {
			e.Target.Log.Error("bench: removing the bench's keys failed", "err", err)
		}
		cancel()
	}
	if e.rdb != nil {
		_ = e.rdb.Close()
	}
	if e.srv != nil {
		e.srv.Stop()
	}
}

// clean deletes every key under the bench's prefix (external Redis only:
// a fresh temporary server holds nothing).
func (e *Env) clean(ctx context.Context) error {
	if e.srv != nil {
		return nil
	}
	var cursor uint64
	for {
		keys, next, err := e.rdb.Scan(ctx, cursor, e.Target.Prefix+":*", 5000).Result()
		if err != nil {
			return fmt.Errorf("bench: scanning old bench keys: %w", err)
		}
		if len(keys) > 0 {
			if err := e.rdb.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("bench: removing old bench keys: %w", err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// RedisDescription says which Redis the run used, for the summary.
func (e *Env) RedisDescription(ctx context.Context) RedisInfo {
	ri := RedisInfo{Addr: e.Addr(), Managed: e.Managed()}
	info, _ := e.rdb.Info(ctx, "server").Result()
	ri.Version = infoField(info, "redis_version")
	if e.Managed() {
		ri.Config = "temporary redis-server started by ax bench: appendonly no, save \"\", maxmemory-policy noeviction"
	} else {
		cfg, _ := e.rdb.ConfigGet(ctx, "appendonly").Result()
		ri.Config = "external Redis: appendonly " + cfg["appendonly"]
	}
	return ri
}

// infoField reads one "name:value" line of an INFO answer.
func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return v
		}
	}
	return ""
}

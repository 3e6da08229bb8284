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
	"github.com/ax-sched/ax/queue/store"
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
	// Cluster > 0 starts a temporary Redis Cluster of that many masters
	// (≥ 3; formed with redis-cli) instead of one redis-server, and spreads
	// the store over as many shards. Addr must be empty.
	Cluster int
	// Region and Prefix name the bench's keys (defaults "bench" and
	// "axbench"), so a run against a live Redis touches none of its data.
	Region, Prefix string
	// Pool is the pool tasks are submitted to and workers serve (default
	// "bench").
	Pool string
	// AOF, for a temporary Redis (or cluster), turns on the append-only
	// file with this appendfsync policy ("everysec", how users run it, or
	// "always"); empty: no persistence.
	AOF string
	// Keep leaves the bench's keys in an external Redis after the run.
	Keep bool
	// EvalSHA runs the store's scripts with EVALSHA even where Redis has
	// Functions (queue.Options.EvalSHA): the A/B of FCALL.
	EvalSHA bool
	// NoSweeper runs without the stand-in for the region leader's sweep:
	// every success then takes a TTL on its record and trail (complete.lua's
	// path for a region whose leader does not sweep). By default the bench
	// sweeps as a leader does, so successes take the path production's do.
	NoSweeper bool
	// Log receives the workers' and the bench's own log lines (default:
	// errors to stderr).
	Log *slog.Logger
}

// Env is an open Target: a client, a store over it, and the temporary
// server when the bench started one.
type Env struct {
	Target Target
	rdb    redis.UniversalClient
	// nodes are a client per server (the one Redis, or every master), for
	// what INFO reports per server.
	nodes []*redis.Client
	srv   *redisproc.Server
	cl    *redisproc.Cluster
	// Store is the region's task store as a worker process builds it.
	Store *store.Store
	// stopSweep ends the sweeper (nil: none runs).
	stopSweep func()
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
	ropts := []redisproc.Option{redisproc.WithBinary(t.RedisServer)}
	switch t.AOF {
	case "":
	case "everysec", "always", "no":
		if addr != "" {
			return nil, errors.New("bench: --aof configures the Redis ax bench starts: leave --redis empty (or configure yours)")
		}
		ropts = append(ropts, redisproc.WithAOF(t.AOF))
	default:
		return nil, fmt.Errorf("bench: --aof %q: want everysec, always or no (the appendfsync policy)", t.AOF)
	}
	shards := 1
	if t.Cluster > 0 {
		if addr != "" {
			return nil, errors.New("bench: --cluster starts a cluster of its own: leave --redis empty")
		}
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		c, err := redisproc.StartCluster(sctx, t.Cluster, 0, ropts...)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.cl, shards = c, t.Cluster
		e.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 256})
		for _, a := range c.Addrs() {
			e.nodes = append(e.nodes, redis.NewClient(&redis.Options{Addr: a, PoolSize: 4, MaxRetries: -1}))
		}
	} else if addr == "" {
		// No persistence: the bench measures the scheduler, not the disk;
		// the summary says so (RedisDescription).
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := redisproc.Start(sctx, ropts...)
		cancel()
		if errors.Is(err, redisproc.ErrNotFound) {
			return nil, fmt.Errorf("bench: %s not found on PATH: install Redis or pass --redis ADDR", t.RedisServer)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.srv, addr = s, s.Addr()
	}
	if e.rdb == nil {
		// Enough connections for every worker, submitter and the leader loop.
		c := redis.NewClient(&redis.Options{Addr: addr, Password: t.Password, PoolSize: 256, MaxRetries: -1})
		e.rdb, e.nodes = c, []*redis.Client{c}
	}
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
	e.Store, err = store.New(e.rdb, queue.Options{Region: t.Region, Prefix: t.Prefix, Shards: shards, EvalSHA: t.EvalSHA})
	if err != nil {
		e.Close()
		return nil, err
	}
	if !t.NoSweeper {
		if e.stopSweep, err = e.sweeper(ctx); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// sweeper stands in for the region leader's sweep: one Sweep now (so the
// first success already finds a sweeper alive) and again every half of
// queue.SweepAlive until stop. Its fence is the bench's own name.
func (e *Env) sweeper(ctx context.Context) (stop func(), err error) {
	f := queue.Fence{Name: "bench-sweep", Token: 1}
	sweep := func(ctx context.Context) error {
		_, err := e.Store.Maintainer().Sweep(ctx, f, queue.MaxBatch)
		return err
	}
	if err := sweep(ctx); err != nil {
		return nil, fmt.Errorf("bench: sweep: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(queue.SweepAlive / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := sweep(ctx); err != nil && ctx.Err() == nil {
					e.Target.Log.Error("bench: sweep failed", "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}

// WithStore is e with a store of its own over e's Redis, built with opts;
// the caller closes e, never the copy.
func (e *Env) WithStore(opts queue.Options) (*Env, error) {
	st, err := store.New(e.rdb, opts)
	if err != nil {
		return nil, err
	}
	return &Env{Target: e.Target, rdb: e.rdb, nodes: e.nodes, Store: st}, nil
}

// Over is an Env that only measures the given Redis servers (INFO per
// server, for StartMeter): it has no store and starts nothing.
func Over(nodes ...*redis.Client) *Env { return &Env{nodes: nodes} }

// Managed reports whether the bench started the Redis itself.
func (e *Env) Managed() bool { return e.srv != nil || e.cl != nil }

// Clustered reports whether the run is on a Redis Cluster (Target.Cluster).
func (e *Env) Clustered() bool { return e.cl != nil }

// Client is the client of the one Redis (not a cluster's).
func (e *Env) Client() *redis.Client { return e.nodes[0] }

// Addr is the Redis address (a cluster's masters, comma-separated).
func (e *Env) Addr() string {
	if e.cl != nil {
		return strings.Join(e.cl.Addrs(), ",")
	}
	return e.nodes[0].Options().Addr
}

// Close removes the bench's keys from an external Redis (unless Keep) or
// stops the temporary server.
func (e *Env) Close() {
	if e.stopSweep != nil {
		e.stopSweep()
		e.stopSweep = nil
	}
	if e.rdb != nil && !e.Managed() && !e.Target.Keep {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := e.clean(ctx); err != nil {
			e.Target.Log.Error("bench: removing the bench's keys failed", "err", err)
		}
		cancel()
	}
	if e.rdb != nil {
		_ = e.rdb.Close()
	}
	if e.cl != nil {
		for _, n := range e.nodes {
			_ = n.Close()
		}
		e.cl.Stop()
	}
	if e.srv != nil {
		e.srv.Stop()
	}
}

// clean deletes every key under the bench's prefix (external Redis only:
// a fresh temporary server holds nothing).
func (e *Env) clean(ctx context.Context) error {
	if e.Managed() {
		return nil
	}
	var cursor uint64
	for {
		keys, next, err := e.nodes[0].Scan(ctx, cursor, e.Target.Prefix+":*", 5000).Result()
		if err != nil {
			return fmt.Errorf("bench: scanning old bench keys: %w", err)
		}
		if len(keys) > 0 {
			if err := e.nodes[0].Unlink(ctx, keys...).Err(); err != nil {
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
	persist := "appendonly no"
	if e.Target.AOF != "" {
		persist = "appendonly yes, appendfsync " + e.Target.AOF
	}
	info, _ := e.nodes[0].Info(ctx, "server").Result()
	ri.Version = InfoField(info, "redis_version")
	if e.cl != nil {
		ri.Config = fmt.Sprintf("temporary Redis Cluster of %d masters (no replicas) started by ax bench, store on %d shards: "+
			"%s, save \"\", maxmemory-policy noeviction", len(e.nodes), e.Store.Options().Shards, persist)
	} else if e.Managed() {
		ri.Config = "temporary redis-server started by ax bench: " + persist + ", save \"\", maxmemory-policy noeviction"
	} else {
		cfg, _ := e.nodes[0].ConfigGet(ctx, "appendonly").Result()
		ri.Config = "external Redis: appendonly " + cfg["appendonly"]
	}
	return ri
}

// InfoField reads one "name:value" line of an INFO answer.
func InfoField(info, name string) string {
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return v
		}
	}
	return ""
}

package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/tlsconf"
	"github.com/ax-sched/ax/region/identity"
	"github.com/redis/go-redis/v9"
)

// redisClient is the one place ax's processes build a Redis client: single,
// Sentinel (its own credentials) or Cluster, over TLS when redis.tls or a
// rediss:// addr says so (sentinels and every node too).
// poolSize > 0 sets its connection pool's size (per node). guard (nil:
// none) checks every new connection's Redis is the region's own (each node
// of a Redis Cluster; a Sentinel's connections pass it).
//
// A call's context deadline bounds it (ContextTimeoutEnabled): a wait for
// a pooled connection and the retries end at the deadline, and so does an
// attempt's read when the deadline comes before the read timeout (5 s), so
// a frozen Redis holds a call no longer than its caller's deadline (the
// probe's 1 s ping, /readyz's 2 s, a worker's 5 s). Blocking calls keep
// working: go-redis reads a BLPOP or XREAD BLOCK of b until b + 10 s, or
// the context's deadline if earlier, and ax gives them either no deadline
// (long-polls, the worker's wait for work) or one past their block (the
// waker's BLPOP: its block + 5 s).
func redisClient(c config.Redis, poolSize int, guard *identity.Guard) (redis.UniversalClient, error) {
	o := &redis.UniversalOptions{Username: c.Username, Password: c.Password, DB: c.DB, PoolSize: poolSize,
		ContextTimeoutEnabled: true}
	if guard != nil {
		o.OnConnect = guard.OnConnect
	}
	switch {
	case c.Sentinel.MasterName != "":
		o.MasterName, o.Addrs = c.Sentinel.MasterName, c.Sentinel.Addrs
		o.SentinelUsername, o.SentinelPassword = c.Sentinel.Username, c.Sentinel.Password
	case len(c.Cluster.Addrs) > 0:
		o.Addrs, o.IsClusterMode = c.Cluster.Addrs, true
	default:
		o.Addrs = []string{c.HostPort()}
	}
	if c.TLSOn() {
		t := c.TLS
		tc, err := tlsconf.Client(tlsconf.Files{CA: t.CA, Cert: t.Cert, Key: t.Key, ServerName: t.ServerName,
			InsecureSkipVerify: t.InsecureSkipVerify && t.AllowInsecure})
		if err != nil {
			return nil, fmt.Errorf("redis.%w", err)
		}
		o.TLSConfig = tc
	}
	return redis.NewUniversalClient(o), nil
}

// redisNode names one Redis in the log: its address, the master name
// Sentinel answers for, or a cluster's seed addresses.
func redisNode(c config.Redis) string {
	switch {
	case c.Sentinel.MasterName != "":
		return "sentinel:" + c.Sentinel.MasterName
	case len(c.Cluster.Addrs) > 0:
		return "cluster:" + strings.Join(c.Cluster.Addrs, ",")
	}
	return c.HostPort()
}

// redisIdentity is who the region's Redis must belong to: this
// federation (fed; "" for a worker, which holds the first it finds), the
// region and its shards.
func redisIdentity(cfg *config.Region, fed string) identity.ID {
	return identity.ID{Federation: fed, Region: cfg.Name, Shards: max(1, cfg.Redis.Shards)}
}

// redisOrigin names the config key that says which Redis cfg reaches
// (redis.addr, redis.sentinel.addrs or redis.cluster.addrs) and where its
// value came from: the variable that set it (AX_REDIS_ADDR) or the config
// file.
func redisOrigin(cfg *config.Region) (key, from string) {
	key = "redis.addr"
	switch {
	case cfg.Redis.Sentinel.MasterName != "":
		key = "redis.sentinel.addrs"
	case len(cfg.Redis.Cluster.Addrs) > 0:
		key = "redis.cluster.addrs"
	}
	env := config.EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
	if slices.Contains(cfg.OverrideEnv(), env) {
		return key, env
	}
	if src := cfg.Source(); src != "" {
		return key, src
	}
	return key, "the config"
}

// redisUnreachable is a server's start failing on its first Redis call: it
// names the key to fix, its value and where the value came from.
func redisUnreachable(cfg *config.Region, err error) error {
	key, from := redisOrigin(cfg)
	return fmt.Errorf("redis at %s (%s, from %s) does not answer: %w", redisNode(cfg.Redis), key, from, err)
}

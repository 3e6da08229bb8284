package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ax-sched/ax/queue"
	"github.com/redis/go-redis/v9"
)

// Key holds a Redis's identity (JSON of ID), outside every shard's hash
// tag. Each node of a Redis Cluster holds its own copy, under Key with a
// hash tag of a slot it serves (node.go).
const Key = "ax:identity"

// ID is who owns a Redis.
type ID struct {
	// Federation is the federation's id (the global etcd's, Federation in
	// package lease); "" for a process that does not know it (a worker):
	// it takes the one it first finds and holds it from then on.
	Federation string `json:"federation"`
	Region     string `json:"region"`
	Shards     int    `json:"shards"`
}

func (id ID) String() string {
	f := id.Federation
	if f == "" {
		f = "?"
	}
	return fmt.Sprintf("federation %s, region %s, %d shard(s)", f, id.Region, id.Shards)
}

// matches reports whether a Redis marked got may serve a process that is want.
func (want ID) matches(got ID) bool {
	return got.Region == want.Region && got.Shards == want.Shards && (want.Federation == "" || got.Federation == want.Federation)
}

// Mismatch is a Redis marked for another owner.
type Mismatch struct {
	Addr      string
	Want, Got ID
}

func (e *Mismatch) Error() string {
	return fmt.Sprintf("the Redis at %s belongs to %s, not to this process's %s: refusing it (check redis.addr; another federation's Redis may have taken the address)",
		e.Addr, e.Got, e.Want)
}

// ErrMismatch matches every *Mismatch.
var ErrMismatch = errors.New("identity: the Redis belongs to another federation or region")

// Is matches ErrMismatch, and queue.ErrUnavailable: to its callers the
// region's own store is out (503 with Retry-After), not failing.
func (e *Mismatch) Is(target error) bool {
	return target == ErrMismatch || target == queue.ErrUnavailable
}

// Guard checks the identity of every new connection of a Redis client
// (OnConnect).
type Guard struct {
	addr  string
	write bool // mark an unmarked Redis (servers; workers only check)
	log   *slog.Logger

	mu     sync.Mutex
	want   ID
	logged string // the last mismatch logged, so each is logged once
}

// NewGuard is the guard of a process that is want, of the Redis at addr
// (for the log). A server marks an unmarked Redis with want (mark); a
// worker (want.Federation "") only checks, and holds the federation it
// first finds.
func NewGuard(addr string, want ID, mark bool, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.Default()
	}
	return &Guard{addr: addr, want: want, write: mark, log: log}
}

// OnConnect reads the identity of the Redis cn reaches, marks it when it
// has none and the guard marks, and fails the connection of a Redis of
// another owner (a *Mismatch, logged at ERROR once per owner found). A
// Sentinel (go-redis runs OnConnect on its connections to the sentinels
// too) holds no data and passes; each node of a Redis Cluster is checked
// on its own key (node.go).
func (g *Guard) OnConnect(ctx context.Context, cn *redis.Conn) error {
	g.mu.Lock()
	want := g.want
	g.mu.Unlock()
	n, b, err := probe(ctx, cn)
	switch {
	case err != nil:
		return fmt.Errorf("identity: read the Redis at %s: %w", g.addr, err)
	case n.key == "":
		return nil
	case b == nil:
		if !g.write || want.Federation == "" || n.replica {
			return nil
		}
		mine, _ := json.Marshal(want)
		if err := cn.SetNX(ctx, n.key, mine, 0).Err(); err != nil {
			return fmt.Errorf("identity: mark the Redis at %s: %w", g.addr, err)
		}
		if b, err = cn.Get(ctx, n.key).Bytes(); err != nil {
			return fmt.Errorf("identity: read the Redis at %s: %w", g.addr, err)
		}
	}
	var got ID
	if err := json.Unmarshal(b, &got); err != nil {
		return fmt.Errorf("identity: the Redis at %s has an unreadable %s: %w", g.addr, Key, err)
	}
	if !want.matches(got) {
		e := &Mismatch{Addr: g.addr, Want: want, Got: got}
		g.mu.Lock()
		first := g.logged != got.String()
		g.logged = got.String()
		g.mu.Unlock()
		if first {
			g.log.Error("refusing a Redis of another owner", "addr", g.addr, "redis_identity", got.String(), "own_identity", want.String())
		}
		return e
	}
	g.mu.Lock()
	if g.want.Federation == "" {
		g.want.Federation = got.Federation // a worker holds the first it finds
	}
	g.logged = ""
	g.mu.Unlock()
	return nil
}

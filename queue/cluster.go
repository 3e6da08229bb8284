package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// cluster is the store's client when it is a Redis Cluster client.
func (s *Engine) Cluster() *redis.ClusterClient {
	c, _ := s.rdb.(*redis.ClusterClient)
	return c
}

// oneNode reports whether every shard is on one server, so one command may
// name the keys of several shards.
func (s *Engine) OneNode() bool { return s.Cluster() == nil || s.opts.Shards == 1 }

// node is the client of the master serving shard: on a cluster that
// master's own client, else the store's client.
func (s *Engine) node(ctx context.Context, shard int) (redis.Cmdable, error) {
	cc := s.Cluster()
	if cc == nil {
		return s.rdb, nil
	}
	n, err := cc.MasterForKey(ctx, s.Prefix(shard))
	if err != nil {
		return nil, fmt.Errorf("queue: master of shard %d: %w", shard, err)
	}
	return n, nil
}

// conn is a connection of its own to the master serving shard, for
// commands that must share one connection (a write and the WAIT after it)
// or be ended from elsewhere (a blocking read, CLIENT UNBLOCK). Close it:
// it returns to its pool.
func (s *Engine) Conn(ctx context.Context, shard int) (*redis.Conn, error) {
	switch c := s.rdb.(type) {
	case *redis.Client: // one Redis, or Sentinel's failover client
		return c.Conn(), nil
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, s.Prefix(shard))
		if err != nil {
			return nil, fmt.Errorf("queue: master of shard %d: %w", shard, err)
		}
		return n.Conn(), nil
	}
	return nil, fmt.Errorf("queue: a %T cannot give a connection of its own", s.rdb)
}

// blockingConn is a conn with its CLIENT ID, so another goroutine can end
// its blocking command early (CLIENT UNBLOCK ... TIMEOUT: the command then
// answers as if its timeout had passed).
type BlockingConn struct {
	node redis.Cmdable // where CLIENT UNBLOCK is sent
	C    *redis.Conn
	id   int64
}

func (s *Engine) BlockingConn(ctx context.Context, shard int) (*BlockingConn, error) {
	node, err := s.node(ctx, shard)
	if err != nil {
		return nil, err
	}
	c, err := s.Conn(ctx, shard)
	if err != nil {
		return nil, err
	}
	id, err := c.ClientID(ctx).Result()
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("queue: client id: %w", err)
	}
	return &BlockingConn{node: node, C: c, id: id}, nil
}

// unblock ends the conn's blocking command, if one is running.
func (b *BlockingConn) Unblock(ctx context.Context) error {
	return b.node.ClientUnblock(ctx, b.id).Err()
}

func (b *BlockingConn) Close() { _ = b.C.Close() }

// blockEach runs fn on a blocking connection of its own to every shard's
// master at once. Once one fn reports that it found something, the others
// are unblocked; blockEach returns when every fn has returned, with the
// first error (an fn that did not run for its connection failing is
// reported too). fn must return promptly once its command was unblocked.
func (s *Engine) BlockEach(ctx context.Context, shards int, fn func(ctx context.Context, c *redis.Conn, shard int) (found bool, err error)) error {
	conns := make([]*BlockingConn, shards)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := s.BlockingConn(ctx, i)
		if err != nil {
			return err
		}
		conns[i] = c
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		mu    sync.Mutex
		first error
		found = make(chan struct{})
	)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := fn(ctx, c.C, i)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			if ok || err != nil {
				once.Do(func() { close(found) })
			}
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
		return first
	case <-found:
	case <-ctx.Done():
	}
	// Unblock the others until they have all returned: an unblock sent
	// before a command reached Redis finds nothing to end.
	for {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		for _, c := range conns {
			_ = c.Unblock(uctx)
		}
		cancel()
		select {
		case <-all:
			mu.Lock()
			defer mu.Unlock()
			return first
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// isMoved tells an answer that the slot is served elsewhere now (a
// resharding or a failover the cluster client has not seen yet).
func IsMoved(err error) bool {
	if err == nil {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") ||
			strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "READONLY")
	}
	return false
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	fnUnknown int32 = iota // not loaded yet
	fnCall                 // FCALL
	FnEval                 // EVALSHA: no Functions
)

// The registry of libraries in use (see above). One key for every store
// of the server, whatever its Prefix: libraries are per server.
const (
	FnRegistry = "ax:fnlibs"
	fnRefresh  = 10 * time.Minute
	FnGrace    = time.Hour
)

// functions is a store's choice of how to run scripts.
type functions struct {
	Mode atomic.Int32
	mu   sync.Mutex   // one load at a time
	next atomic.Int64 // when (unix ns) to refresh the library's registry time
}

// fcaller is what FCALL needs of a client: every client, connection and
// cluster node client of go-redis has it.
type fcaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FunctionLoadReplace(ctx context.Context, code string) *redis.StringCmd
}

// run runs sc on c (the store's client, or a connection or node of it).
func (s *Engine) Run(ctx context.Context, c redis.Scripter, sc *Script, keys []string, args ...any) *redis.Cmd {
	fc, ok := c.(fcaller)
	if !ok {
		return sc.Ev.Run(ctx, c, keys, args...)
	}
	if s.fns.Mode.Load() == fnUnknown {
		s.LoadFunctions(ctx) // on failure the FCALL below tells why
	}
	if s.fns.Mode.Load() == FnEval {
		return sc.Ev.Run(ctx, c, keys, args...)
	}
	if now := time.Now().UnixNano(); now >= s.fns.next.Load() {
		s.fns.next.Store(now + int64(fnRefresh))
		s.rdb.ZAdd(ctx, FnRegistry, redis.Z{Score: float64(s.Now().UnixMilli()), Member: Library.Name}) // best effort
	}
	cmd := fc.FCall(ctx, sc.Fn, keys, args...)
	switch err := cmd.Err(); {
	case err == nil:
		// A client that may not load the library (a worker's Redis ACL
		// user) runs the one the servers loaded, without trying again.
		s.fns.Mode.CompareAndSwap(fnUnknown, fnCall)
	case noFunction(err):
		if err := s.loadOn(ctx, c, fc, keys); err != nil {
			return redis.NewCmdResult(nil, err)
		}
		cmd = fc.FCall(ctx, sc.Fn, keys, args...)
	case unknownCommand(err): // a server that has no Functions (now)
		s.fns.Mode.Store(FnEval)
		return sc.Ev.Run(ctx, c, keys, args...)
	}
	return cmd
}

// LoadFunctions loads the script library into the store's Redis (on a
// cluster, into every master), replacing one of the same name; it is what
// the store's first script call does. A Redis without Functions is not an
// error: the store then runs its scripts with EVALSHA.
func (s *Engine) LoadFunctions(ctx context.Context) error {
	s.fns.mu.Lock()
	defer s.fns.mu.Unlock()
	if s.fns.Mode.Load() != fnUnknown {
		return nil
	}
	var err error
	if cc := s.Cluster(); cc != nil {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return n.FunctionLoadReplace(ctx, Library.code).Err()
		})
	} else {
		err = s.rdb.FunctionLoadReplace(ctx, Library.code).Err()
	}
	switch {
	case err == nil:
		s.fns.Mode.Store(fnCall)
		s.fns.next.Store(time.Now().UnixNano() + int64(fnRefresh))
		s.PruneFunctions(ctx) // housekeeping: a failure leaves old libraries for the next load
	case unknownCommand(err):
		s.fns.Mode.Store(FnEval)
		return nil
	default:
		return fmt.Errorf("queue: load the script library: %w", err)
	}
	return nil
}

// PruneFunctions registers the store's library as used now and deletes
// the other ax_ libraries unused for longer than fnGrace (see the top of
// this file); it returns the names deleted. LoadFunctions runs it.
func (s *Engine) PruneFunctions(ctx context.Context) ([]string, error) {
	now := s.Now().UnixMilli()
	if err := s.rdb.ZAdd(ctx, FnRegistry, redis.Z{Score: float64(now), Member: Library.Name}).Err(); err != nil {
		return nil, fmt.Errorf("queue: register the script library: %w", err)
	}
	used, err := s.rdb.ZRangeWithScores(ctx, FnRegistry, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: read the script library registry: %w", err)
	}
	last := make(map[string]float64, len(used))
	for _, z := range used {
		last[fmt.Sprint(z.Member)] = z.Score
	}
	// The libraries on the server(s), and a way to delete from each.
	present := map[string]bool{}
	each := func(f func(redis.Cmdable) error) error { return f(s.rdb) }
	if cc := s.Cluster(); cc != nil {
		each = func(f func(redis.Cmdable) error) error {
			return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return f(n) })
		}
	}
	var mu sync.Mutex
	err = each(func(c redis.Cmdable) error {
		libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "ax_*"}).Result()
		mu.Lock()
		defer mu.Unlock()
		for _, l := range libs {
			present[l.Name] = true
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue: list script libraries: %w", err)
	}
	cutoff := float64(now - FnGrace.Milliseconds())
	var gone []string
	for name := range present {
		t, ok := last[name]
		switch {
		case name == Library.Name || !strings.HasPrefix(name, "ax_"):
		case !ok: // left by a build from before the registry: its grace starts now
			s.rdb.ZAddNX(ctx, FnRegistry, redis.Z{Score: float64(now), Member: name})
		case t < cutoff:
			err := each(func(c redis.Cmdable) error {
				if err := c.FunctionDelete(ctx, name).Err(); err != nil && !strings.Contains(err.Error(), "not found") {
					return err
				}
				return nil
			})
			if err != nil {
				return gone, fmt.Errorf("queue: delete script library %s: %w", name, err)
			}
			s.rdb.ZRem(ctx, FnRegistry, name)
			gone = append(gone, name)
		}
	}
	// Registry entries of libraries no server holds any more.
	for name, t := range last {
		if !present[name] && t < cutoff {
			s.rdb.ZRem(ctx, FnRegistry, name)
		}
	}
	slices.Sort(gone)
	return gone, nil
}

// loadOn loads the library where an FCALL on c found none: the master of
// keys[0] on a cluster client, else c itself (a connection or node is
// that server; a Sentinel client reaches the current master).
func (s *Engine) loadOn(ctx context.Context, c redis.Scripter, fc fcaller, keys []string) error {
	if cc, ok := c.(*redis.ClusterClient); ok && len(keys) > 0 {
		n, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return fmt.Errorf("queue: load the script library: %w", err)
		}
		fc = n
	}
	if err := fc.FunctionLoadReplace(ctx, Library.code).Err(); err != nil {
		return fmt.Errorf("queue: load the script library: %w", err)
	}
	return nil
}

// FunctionsInUse reports whether the store runs its scripts with FCALL
// (false: not decided yet, or EVALSHA).
func (s *Engine) FunctionsInUse() bool { return s.fns.Mode.Load() == fnCall }

func noFunction(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.Contains(err.Error(), "Function not found")
}

// unknownCommand: Redis < 7 (and miniredis) answer FCALL and FUNCTION with
// "ERR unknown command"; Redis 6.0 "ERR unknown command `FUNCTION`".
func unknownCommand(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	m := err.Error()
	return strings.HasPrefix(m, "ERR unknown command") || strings.HasPrefix(m, "ERR unknown subcommand")
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// How scripts run (scripts.go). On Redis 7 and later the library is
// loaded with FUNCTION LOAD REPLACE when the store first runs a script (on
// a cluster: on every master), and every script is an FCALL: lib.lua's
// helpers are defined once per load instead of once per call (the prelude
// cost 6 – 11 µs of Redis a call, docs/benchmarks.md). A server that
// answers an FCALL with "Function not found" lost the library — a restart
// without persistence, a failover to a replica that never had it, a
// FUNCTION FLUSH, a cluster master added later —: the store loads it there
// and calls again. Where Redis has no Functions (Redis < 7: Debian 11
// ships 6.0; miniredis under `ax dev`) FUNCTION LOAD or FCALL is an
// unknown command, and the store runs the scripts with EVALSHA for good.

const (
	fnUnknown int32 = iota // not loaded yet
	fnCall                 // FCALL
	fnEval                 // EVALSHA: no Functions
)

// functions is a store's choice of how to run scripts.
type functions struct {
	mode atomic.Int32
	mu   sync.Mutex // one load at a time
}

// fcaller is what FCALL needs of a client: every client, connection and
// cluster node client of go-redis has it.
type fcaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FunctionLoadReplace(ctx context.Context, code string) *redis.StringCmd
}

// run runs sc on c (the store's client, or a connection or node of it).
func (s *Store) run(ctx context.Context, c redis.Scripter, sc *script, keys []string, args ...any) *redis.Cmd {
	fc, ok := c.(fcaller)
	if !ok {
		return sc.ev.Run(ctx, c, keys, args...)
	}
	if s.fns.mode.Load() == fnUnknown {
		s.LoadFunctions(ctx) // on failure the FCALL below tells why
	}
	if s.fns.mode.Load() == fnEval {
		return sc.ev.Run(ctx, c, keys, args...)
	}
	cmd := fc.FCall(ctx, sc.fn, keys, args...)
	switch err := cmd.Err(); {
	case err == nil:
	case noFunction(err):
		if err := s.loadOn(ctx, c, fc, keys); err != nil {
			return redis.NewCmdResult(nil, err)
		}
		cmd = fc.FCall(ctx, sc.fn, keys, args...)
	case unknownCommand(err): // a server that has no Functions (now)
		s.fns.mode.Store(fnEval)
		return sc.ev.Run(ctx, c, keys, args...)
	}
	return cmd
}

// LoadFunctions loads the script library into the store's Redis (on a
// cluster, into every master), replacing one of the same name; it is what
// the store's first script call does. A Redis without Functions is not an
// error: the store then runs its scripts with EVALSHA.
func (s *Store) LoadFunctions(ctx context.Context) error {
	s.fns.mu.Lock()
	defer s.fns.mu.Unlock()
	if s.fns.mode.Load() != fnUnknown {
		return nil
	}
	var err error
	if cc := s.cluster(); cc != nil {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return n.FunctionLoadReplace(ctx, library.code).Err()
		})
	} else {
		err = s.rdb.FunctionLoadReplace(ctx, library.code).Err()
	}
	switch {
	case err == nil:
		s.fns.mode.Store(fnCall)
	case unknownCommand(err):
		s.fns.mode.Store(fnEval)
		return nil
	default:
		return fmt.Errorf("queue: load the script library: %w", err)
	}
	return nil
}

// loadOn loads the library where an FCALL on c found none: the master of
// keys[0] on a cluster client, else c itself (a connection or node is
// that server; a Sentinel client reaches the current master).
func (s *Store) loadOn(ctx context.Context, c redis.Scripter, fc fcaller, keys []string) error {
	if cc, ok := c.(*redis.ClusterClient); ok && len(keys) > 0 {
		n, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return fmt.Errorf("queue: load the script library: %w", err)
		}
		fc = n
	}
	if err := fc.FunctionLoadReplace(ctx, library.code).Err(); err != nil {
		return fmt.Errorf("queue: load the script library: %w", err)
	}
	return nil
}

// FunctionsInUse reports whether the store runs its scripts with FCALL
// (false: not decided yet, or EVALSHA).
func (s *Store) FunctionsInUse() bool { return s.fns.mode.Load() == fnCall }

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

package server

import (
	"maps"
	"sync"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/queue"
)

// ReloadFile re-reads file's API tokens into the running server (SIGHUP).
// A file that does not load or validate changes nothing.
func (s *Server) ReloadFile(file string) {
	cfg, err := config.Load(file)
	if err == nil {
		err = cfg.ValidateServer()
	}
	if err != nil {
		s.log.Error("SIGHUP: config not reloaded", "err", err)
		return
	}
	s.Reload(cfg)
}

// Reload puts cfg's API tokens, limits, fair shares, quotas and budgets in service and re-reads
// the API certificate (SIGHUP, in ax server and ax dev).
func (s *Server) Reload(cfg *config.Region) {
	s.auth.SetTokens(apiTokens(cfg))
	l := limitsOf(cfg)
	s.limits.Store(&l)
	fs := fairShareOf(cfg)
	s.fairShare.Store(&fs)
	s.current.Store(cfg)
	sl := slowLanesOf(cfg)
	s.slowLanes.Store(&sl)
	s.quotas.Store(&cfg.Quotas)
	s.node.SetBudgets(budgetsOf(cfg))
	s.log.Info("SIGHUP: API tokens, limits and quotas reloaded", "tokens", len(cfg.Auth.Tokens), "limits", len(l), "fair_share_pools", len(fs), "slow_lane_pools", len(sl))
	if s.tls != nil {
		// The files the server started with, re-read (new paths need a
		// restart).
		if err := s.tls.Reload(); err != nil {
			s.log.Error("SIGHUP: API certificate not reloaded", "err", err)
			return
		}
		s.log.Info("SIGHUP: API certificate reloaded")
	}
}

// fairShares are the region's fair shares by pool now, as the leader writes
// them to the store: the file's (SIGHUP reloads them), each pool's replaced
// by its live override in the global etcd (/ax/fairshare/<region>/<pool>)
// while one is set and valid; null there turns the pool's off. An invalid
// override changes nothing (the pool keeps the override last applied, or
// its file's). Each value written is decoded, checked and logged once.
func (s *Server) fairShares() map[string]queue.FairShare {
	file := *s.fairShare.Load()
	ov := s.view.FairShareOverrides(s.cfg.Name)
	c := &s.overrides
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(ov) == 0 && len(c.byKey) == 0 {
		return file
	}
	if c.byKey == nil {
		c.byKey = map[string]override{}
	}
	out := maps.Clone(file)
	set := map[string]bool{}
	for pool, b := range ov {
		key := s.cfg.Etcd.Prefix + "fairshare/" + s.cfg.Name + "/" + pool
		set[key] = true
		o, seen := c.byKey[key]
		if !seen || o.value != string(b) {
			o.value = string(b)
			switch fs, err := s.current.Load().FairShareOverride(key, pool, b); {
			case err != nil:
				s.log.Error("fair-share override ignored: the pool keeps the fair share it had", "key", key, "err", err)
			default:
				s.log.Info("fair-share override applied", "key", key, "value", o.value)
				o.share, o.applied = nil, true
				if fs != nil {
					q := queueFairShare(*fs)
					o.share = &q
				}
			}
			c.byKey[key] = o
		}
		if !o.applied {
			continue
		}
		if o.share == nil {
			delete(out, pool)
		} else {
			out[pool] = *o.share
		}
	}
	for key := range c.byKey {
		if !set[key] {
			delete(c.byKey, key)
			s.log.Info("fair-share override removed: the pool's file share is back", "key", key)
		}
	}
	return out
}

// overrides remembers each live fair-share override by its etcd key.
type overrides struct {
	mu    sync.Mutex
	byKey map[string]override
}

// override is one key's value as last seen and the override last applied
// under the key, which an invalid value leaves in force.
type override struct {
	value   string
	applied bool             // a valid value was seen under the key
	share   *queue.FairShare // what it applied; nil: fair share off
}

// maxBacklogBytes is tenant's max_backlog_bytes in this region (0: none),
// as last loaded (SIGHUP reloads it).
func (s *Server) maxBacklogBytes(tenant string) int64 {
	if q := s.quotas.Load(); q != nil {
		return q.Quota(tenant).MaxBacklogBytes
	}
	return 0
}

// memoryReserve is quotas.memory_reserve as last loaded (0: off).
func (s *Server) memoryReserve() float64 {
	if q := s.quotas.Load(); q != nil {
		return q.MemoryReserve
	}
	return 0
}

// maxBacklog is tenant's max_backlog in this region (0: none), as last
// loaded (SIGHUP reloads it).
func (s *Server) maxBacklog(tenant string) int {
	if q := s.quotas.Load(); q != nil {
		return q.Quota(tenant).MaxBacklog
	}
	return 0
}

package region

import (
	"context"
	"sort"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Preemption limits (docs/architecture.md §6). Zero values take the defaults noted.
type Preemption struct {
	Disabled              bool
	MinPriorityGap        int           // victim at least this many levels lower (default 2)
	MaxRuntime            time.Duration // victims that ran longer are kept (default 30m)
	MaxPerTask            int           // a task is preempted fewer than this many times (default 2)
	MaxPerWorkerPerMinute int           // default 2
	ReadmitRate           float64       // preempted tasks re-admitted per second per region (default 10)
	// Wait is how long an urgent task must wait in a full pool before a
	// preemption is considered — the "no slot frees otherwise" test
	// (default 2s).
	Wait time.Duration
}

func (p *Preemption) defaults() {
	if p.MinPriorityGap <= 0 {
		p.MinPriorityGap = 2
	}
	if p.MaxRuntime <= 0 {
		p.MaxRuntime = 30 * time.Minute
	}
	if p.MaxPerTask <= 0 {
		p.MaxPerTask = 2
	}
	if p.MaxPerWorkerPerMinute <= 0 {
		p.MaxPerWorkerPerMinute = 2
	}
	if p.ReadmitRate == 0 {
		p.ReadmitRate = 10
	}
	if p.Wait <= 0 {
		p.Wait = 2 * time.Second
	}
}

// Reasons of preemption decisions.
const (
	Preempted               = "PREEMPTED"
	DeniedNoCandidate       = "PREEMPT_DENIED_NO_PREEMPTIBLE"
	DeniedPriorityGap       = "PREEMPT_DENIED_PRIORITY_GAP"
	DeniedRuntime           = "PREEMPT_DENIED_RUNTIME"
	DeniedPreemptedTooOften = "PREEMPT_DENIED_PREEMPT_COUNT"
	DeniedWorkerRate        = "PREEMPT_DENIED_WORKER_RATE"
)

// preemptLoop looks for urgent tasks stuck in full pools and asks workers
// to give back lower-priority preemptible work.
func (c *Cell) preemptLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	if c.cfg.Preemption.Disabled {
		return
	}
	byWorker := map[string][]time.Time{} // preemptions per worker in the last minute
	pending := map[string]time.Time{}    // urgent task → when its preemption was requested
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		for id, at := range pending {
			if now.Sub(at) > time.Minute {
				delete(pending, id)
			}
		}
		for w, ts := range byWorker {
			if recent(ts, now) == 0 {
				delete(byWorker, w)
			}
		}
		figs := c.Figures()
		for _, p := range figs.Pools {
			// Only when no slot frees otherwise: the pool is full.
			if p.Slots == 0 || p.Running < p.Slots {
				continue
			}
			if err := c.preemptPool(ctx, f, p.Name, byWorker, pending); err != nil {
				if c.failed(ctx, "preempt", err, lost) {
					return
				}
			}
		}
	}
}

func (c *Cell) preemptPool(ctx context.Context, f queue.Fence, pool string, byWorker map[string][]time.Time, pending map[string]time.Time) error {
	cfg := c.cfg.Preemption
	now := time.Now()
	heads, err := c.store.Heads(ctx, pool)
	if err != nil {
		return err
	}
	// The most urgent waiting task that could ever preempt someone.
	var urgent *queue.WaitingHead
	for i := range heads {
		h := &heads[i]
		if h.Priority+cfg.MinPriorityGap > task.MaxPriority || now.Sub(h.EnqueuedAt) < cfg.Wait {
			continue
		}
		if urgent == nil || h.Priority < urgent.Priority {
			urgent = h
		}
	}
	if urgent == nil {
		return nil
	}
	// One victim per urgent task until it is claimed (or 30 s pass).
	if at, ok := pending[urgent.ID]; ok && now.Sub(at) < 30*time.Second {
		return nil
	}
	running, err := c.store.Running(ctx, pool)
	if err != nil {
		return err
	}
	var victims []queue.RunningTask
	denied := DeniedNoCandidate
	for _, r := range running {
		switch {
		case !r.Preemptible:
			continue
		case r.Priority < urgent.Priority+cfg.MinPriorityGap:
			denied = DeniedPriorityGap
		case now.Sub(r.StartedAt) >= cfg.MaxRuntime:
			denied = DeniedRuntime
		case r.PreemptCount >= cfg.MaxPerTask:
			denied = DeniedPreemptedTooOften
		case recent(byWorker[r.Worker], now) >= cfg.MaxPerWorkerPerMinute:
			denied = DeniedWorkerRate
		default:
			victims = append(victims, r)
		}
	}
	if len(victims) == 0 {
		c.metrics.preemptions.WithLabelValues(c.cfg.Region, pool, denied).Inc()
		c.log.Debug("preemption denied", "pool", pool, "task", urgent.ID, "priority", urgent.Priority, "reason", denied)
		pending[urgent.ID] = now.Add(-25 * time.Second) // look again in ~5 s
		return nil
	}
	// Least urgent first, then the one that ran least (least work lost).
	sort.Slice(victims, func(i, j int) bool {
		if victims[i].Priority != victims[j].Priority {
			return victims[i].Priority > victims[j].Priority
		}
		return victims[i].StartedAt.After(victims[j].StartedAt)
	})
	for _, v := range victims {
		ok, why, err := c.store.RequestPreemption(ctx, f, v.ID, v.Token, urgent.ID)
		if err != nil {
			return err
		}
		if !ok {
			c.log.Debug("preemption refused by the store", "victim", v.ID, "why", why)
			continue
		}
		byWorker[v.Worker] = append(byWorker[v.Worker], now)
		pending[urgent.ID] = now
		c.metrics.preemptions.WithLabelValues(c.cfg.Region, pool, Preempted).Inc()
		c.log.Info("preempting", "pool", pool, "victim", v.ID, "victim_priority", v.Priority,
			"for", urgent.ID, "priority", urgent.Priority, "reason", Preempted)
		return nil
	}
	return nil
}

// recent counts timestamps within the last minute.
func recent(ts []time.Time, now time.Time) int {
	n := 0
	for _, t := range ts {
		if now.Sub(t) < time.Minute {
			n++
		}
	}
	return n
}

package region

import (
	"cmp"
	"context"
	"sort"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
	"github.com/ax-sched/ax/task"
)

// Defaults of Preemption's limits.
const (
	MinPriorityGapDefault        = 2
	MaxRuntimeDefault            = 30 * time.Minute
	MaxPerTaskDefault            = 2
	MaxPerWorkerPerMinuteDefault = 2
	ReadmitRateDefault           = 10.0
	PreemptWaitDefault           = 2 * time.Second
)

// Preemption limits (docs/architecture.md §6). Zero (or negative) values
// take the defaults named; ReadmitRate only when zero.
type Preemption struct {
	Disabled              bool
	MinPriorityGap        int           // victim at least this many levels lower (MinPriorityGapDefault)
	MaxRuntime            time.Duration // victims that ran longer are kept (MaxRuntimeDefault)
	MaxPerTask            int           // a task is preempted fewer than this many times (MaxPerTaskDefault)
	MaxPerWorkerPerMinute int           // MaxPerWorkerPerMinuteDefault
	// ReadmitRate is how many preempted tasks the promoter re-admits a
	// second, per region (ReadmitRateDefault; negative: no limit).
	ReadmitRate float64
	// Wait is how long an urgent task must wait in a full pool before a
	// preemption is considered — the "no slot frees otherwise" test
	// (PreemptWaitDefault).
	Wait time.Duration
}

func (p Preemption) withDefaults() Preemption {
	p.MinPriorityGap = cmp.Or(max(p.MinPriorityGap, 0), MinPriorityGapDefault)
	p.MaxRuntime = cmp.Or(max(p.MaxRuntime, 0), MaxRuntimeDefault)
	p.MaxPerTask = cmp.Or(max(p.MaxPerTask, 0), MaxPerTaskDefault)
	p.MaxPerWorkerPerMinute = cmp.Or(max(p.MaxPerWorkerPerMinute, 0), MaxPerWorkerPerMinuteDefault)
	p.Wait = cmp.Or(max(p.Wait, 0), PreemptWaitDefault)
	return p
}

// Reasons of preemption decisions.
const (
	Preempted               = "PREEMPTED"
	DeniedNoCandidate       = "PREEMPT_DENIED_NO_PREEMPTIBLE"
	DeniedPriorityGap       = "PREEMPT_DENIED_PRIORITY_GAP"
	DeniedRuntime           = "PREEMPT_DENIED_RUNTIME"
	DeniedPreemptedTooOften = "PREEMPT_DENIED_PREEMPT_COUNT"
	DeniedWorkerRate        = "PREEMPT_DENIED_WORKER_RATE"
	// DeniedRoom: the preemptible tasks of no one worker hold the slots
	// the urgent task asks for (a whole slot's task waits for eight
	// eighths, all on one worker).
	DeniedRoom = "PREEMPT_DENIED_ROOM"
)

// Timing of the preempter: how often it looks at the pools, how long an
// urgent task waits for its victim's slot before another victim is asked
// for, how soon a denied one is looked at again, and the window of the
// per-worker rate (after which a request is forgotten too).
const (
	preemptTick    = 250 * time.Millisecond
	preemptPending = 30 * time.Second
	preemptRetry   = 5 * time.Second
	preemptWindow  = time.Minute
)

// preemptStore is what the preempter asks of the store.
type preemptStore interface {
	Heads(ctx context.Context, pool string) ([]queue.WaitingHead, error)
	Running(ctx context.Context, pool string) ([]queue.RunningTask, error)
	RequestPreemption(ctx context.Context, f queue.Fence, id, token, preemptor string) (bool, string, error)
}

var _ preemptStore = (*maint.Maintainer)(nil)

// preempter looks for urgent tasks stuck in full pools and asks workers
// to give back lower-priority preemptible work, within the Preemption
// limits. It does nothing when preemption is disabled.
type preempter struct {
	startStop
	cfg     Preemption
	term    *term
	store   preemptStore
	metrics *Metrics
	figures func() Figures // the region's last figures

	byWorker map[string][]time.Time // preemptions per worker in the last minute
	pending  map[string]time.Time   // urgent task → when its preemption was requested
}

var _ service = (*preempter)(nil)

func newPreempter(cfg Preemption, t *term, store preemptStore, m *Metrics, figures func() Figures) *preempter {
	return &preempter{cfg: cfg.withDefaults(), term: t, store: store, metrics: m, figures: figures,
		byWorker: map[string][]time.Time{}, pending: map[string]time.Time{}}
}

func (s *preempter) Start(ctx context.Context) { s.start(ctx, s.run) }

func (s *preempter) run(ctx context.Context) {
	if s.cfg.Disabled {
		return
	}
	t := time.NewTicker(preemptTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		for id, at := range s.pending {
			if now.Sub(at) > preemptWindow {
				delete(s.pending, id)
			}
		}
		for w, ts := range s.byWorker {
			if recent(ts, now) == 0 {
				delete(s.byWorker, w)
			}
		}
		for _, p := range s.figures().Pools {
			// Only when no slot frees otherwise: the pool is full, less
			// than a whole slot free (in slot units: four quarter tasks
			// fill one).
			free := float64(p.Slots) - p.Busy()
			if p.Slots == 0 || free >= 1 {
				continue
			}
			if err := s.preemptPool(ctx, p.Name, int(free*task.MilliSlots)); err != nil {
				if s.term.failed(ctx, "preempt", err) {
					return
				}
			}
		}
	}
}

// preemptPool asks for the slots of the pool's most urgent waiting task
// that could preempt someone: when free (milli-slots the pool has free)
// holds less than it asks for, the fewest least urgent victims of one
// worker whose slots (in slot units: eight tasks of an eighth hold one)
// hold what it asks for.
func (s *preempter) preemptPool(ctx context.Context, pool string, free int) error {
	cfg, byWorker, pending := s.cfg, s.byWorker, s.pending
	now := time.Now()
	heads, err := s.store.Heads(ctx, pool)
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
	if urgent == nil || urgent.Slots > 0 && urgent.Slots <= free {
		return nil // it fits already
	}
	// One victim per urgent task until it is claimed (or preemptPending passes).
	if at, ok := pending[urgent.ID]; ok && now.Sub(at) < preemptPending {
		return nil
	}
	running, err := s.store.Running(ctx, pool)
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
	if len(victims) > 0 {
		if victims = enough(victims, milliOf(urgent.Slots)); len(victims) == 0 {
			denied = DeniedRoom
		}
	}
	if len(victims) == 0 {
		s.metrics.preemptions.WithLabelValues(s.term.region, pool, denied).Inc()
		s.term.log.Debug("preemption denied", "pool", pool, "task", urgent.ID, "priority", urgent.Priority, "reason", denied)
		pending[urgent.ID] = now.Add(preemptRetry - preemptPending) // look again in preemptRetry
		return nil
	}
	asked := false
	for _, v := range victims {
		ok, why, err := s.store.RequestPreemption(ctx, s.term.fence, v.ID, v.Token, urgent.ID)
		if err != nil {
			return err
		}
		if !ok {
			s.term.log.Debug("preemption refused by the store", "victim", v.ID, "why", why)
			continue
		}
		asked = true
		s.metrics.preemptions.WithLabelValues(s.term.region, pool, Preempted).Inc()
		s.term.log.Info("preempting", "pool", pool, "victim", v.ID, "victim_priority", v.Priority,
			"for", urgent.ID, "priority", urgent.Priority, "reason", Preempted)
	}
	if asked {
		// One decision for the worker's rate, however many of its tasks
		// it took to free the slots.
		byWorker[victims[0].Worker] = append(byWorker[victims[0].Worker], now)
		pending[urgent.ID] = now
	}
	return nil
}

// milliOf is a task's milli-slots (0: a whole slot).
func milliOf(m int) int {
	if m <= 0 {
		return task.MilliSlots
	}
	return m
}

// enough picks, among victims, the fewest of one worker whose slots add up
// to need (milli-slots): least urgent first, then the one that ran least
// (least work lost), on the first worker whose victims in that order
// reach need; none when no worker's do.
func enough(victims []queue.RunningTask, need int) []queue.RunningTask {
	sort.Slice(victims, func(i, j int) bool {
		if victims[i].Priority != victims[j].Priority {
			return victims[i].Priority > victims[j].Priority
		}
		return victims[i].StartedAt.After(victims[j].StartedAt)
	})
	held := map[string]int{}
	for _, v := range victims {
		if held[v.Worker] += milliOf(v.Slots); held[v.Worker] >= need {
			var out []queue.RunningTask
			for _, u := range victims {
				if u.Worker == v.Worker {
					out = append(out, u)
				}
				if u.ID == v.ID {
					return out
				}
			}
		}
	}
	return nil
}

// recent counts timestamps within the last minute.
func recent(ts []time.Time, now time.Time) int {
	n := 0
	for _, t := range ts {
		if now.Sub(t) < preemptWindow {
			n++
		}
	}
	return n
}

package region

import (
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Thresholds of queue fill (ready ÷ queue capacity), docs/architecture.md §6.
type Thresholds struct {
	Alert  float64 // alert metric; priorities 3–4 deferred first
	Spill  float64 // non-critical work placed elsewhere (placement's hard watermark)
	Pause  float64 // priorities 3–4 paused …
	Resume float64 // … until the fill falls under this (hysteresis)
}

// DefaultThresholds are the thresholds of a region that sets none: alert at
// 60 % queue fill, spill at 80 %, pause at 95 %, resume below 40 %.
func DefaultThresholds() Thresholds {
	return Thresholds{Alert: 0.60, Spill: 0.80, Pause: 0.95, Resume: 0.40}
}

// Spreads a deferred low-priority task waits (jittered to 50–100 %):
// longer while its pool is paused, so a top-of-the-hour spike is released
// gradually.
const (
	deferSpread       = 2 * time.Second
	deferSpreadPaused = 5 * time.Second
)

// pressure is one pool's backpressure state.
type pressure struct {
	level  int // 0 none, 1 alert, 2 spill, 3 paused
	paused bool
}

// pressures is the backpressure state of the region's pools: the figures
// publisher updates it from each pool's fresh figures, the promoter defers
// by it. It outlives terms and is safe for concurrent use.
type pressures struct {
	thresholds func(pool string) Thresholds
	log        *slog.Logger

	mu     sync.Mutex
	byPool map[string]*pressure
}

func newPressures(thresholds func(pool string) Thresholds, log *slog.Logger) *pressures {
	return &pressures{thresholds: thresholds, log: log, byPool: map[string]*pressure{}}
}

// update applies the thresholds with hysteresis to a pool's fresh figures
// and reports whether low priorities are paused. Queued work keeps
// draining (claims are never paused), so the fill falls and a pause always
// lifts.
func (ps *pressures) update(p PoolFigures) bool {
	th := ps.thresholds(p.Name)
	fill := p.QueueFill()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	st := ps.byPool[p.Name]
	if st == nil {
		st = &pressure{}
		ps.byPool[p.Name] = st
	}
	was := st.paused
	switch {
	case fill >= th.Pause:
		st.paused = true
	case fill < th.Resume:
		st.paused = false
	}
	switch {
	case st.paused:
		st.level = 3
	case fill >= th.Spill:
		st.level = 2
	case fill >= th.Alert:
		st.level = 1
	default:
		st.level = 0
	}
	if st.paused != was {
		ps.log.Info("backpressure", "pool", p.Name, "paused", st.paused, "fill", fill)
	}
	return st.paused
}

// level is pool's pressure level: 0 none, 1 alert, 2 spill, 3 paused.
func (ps *pressures) level(pool string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if st := ps.byPool[pool]; st != nil {
		return st.level
	}
	return 0
}

// hot names the pools whose low priorities are deferred now (level ≥
// alert, or paused), and the spread a deferred task waits.
func (ps *pressures) hot() ([]string, time.Duration) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var hot []string
	spread := deferSpread
	for name, st := range ps.byPool {
		if st.level >= 1 {
			hot = append(hot, name)
		}
		if st.paused {
			spread = deferSpreadPaused
		}
	}
	return hot, spread
}

// backpressure turns placements of low-priority, non-critical due tasks
// into a hot local pool into jittered deferrals (DEFERRED_BACKPRESSURE),
// in place, and counts them.
func (ps *pressures) backpressure(tasks []*task.Task, as []queue.Assignment, now time.Time) ([]queue.Assignment, int) {
	hot, spread := ps.hot()
	if len(hot) == 0 {
		return as, 0
	}
	isHot := map[string]bool{}
	for _, h := range hot {
		isHot[h] = true
	}
	byID := make(map[string]*task.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
	}
	deferred := 0
	for i, a := range as {
		t := byID[a.ID]
		if t == nil || a.Pool == "" || a.Region != "" || !isHot[a.Pool] || t.Priority < 3 || t.Critical {
			continue
		}
		as[i] = queue.Assignment{ID: a.ID, RetryAt: now.Add(jitterOf(a.ID, spread)), Reason: task.ReasonDeferred}
		deferred++
	}
	return as, deferred
}

// jitterOf is a deterministic 50–100 % of d for an id.
func jitterOf(id string, d time.Duration) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(id))
	return d/2 + time.Duration(uint64(h.Sum32())%1000)*d/2000
}

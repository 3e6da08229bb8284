package region

import (
	"hash/fnv"
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

// DefaultThresholds are the seeds' values.
func DefaultThresholds() Thresholds {
	return Thresholds{Alert: 0.60, Spill: 0.80, Pause: 0.95, Resume: 0.40}
}

// pressure is one pool's backpressure state, owned by the leader.
type pressure struct {
	level  int // 0 none, 1 alert, 2 spill, 3 paused
	paused bool
}

// updatePressure applies the thresholds with hysteresis to a pool's fresh
// figures and reports whether low priorities are paused. Queued work keeps
// draining (claims are never paused), so the fill falls and a pause always
// lifts.
func (c *Cell) updatePressure(p PoolFigures) bool {
	th := c.poolThresholds(p.Name)
	fill := p.QueueFill()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pressure == nil {
		c.pressure = map[string]*pressure{}
	}
	st := c.pressure[p.Name]
	if st == nil {
		st = &pressure{}
		c.pressure[p.Name] = st
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
		c.log.Info("backpressure", "pool", p.Name, "paused", st.paused, "fill", fill)
	}
	return st.paused
}

func (c *Cell) poolThresholds(pool string) Thresholds {
	for _, p := range c.cfg.Pools {
		if p.Name == pool {
			return p.Thresholds
		}
	}
	return c.cfg.Thresholds
}

func (c *Cell) pressureLevel(pool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.pressure[pool]; st != nil {
		return st.level
	}
	return 0
}

// hotPools are the pools whose low priorities are deferred now (level ≥
// alert, or paused), and the spread a deferred task waits: longer when
// paused, so a top-of-the-hour spike is released gradually.
func (c *Cell) hotPools() ([]string, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var hot []string
	spread := 2 * time.Second
	for name, st := range c.pressure {
		if st.level >= 1 {
			hot = append(hot, name)
		}
		if st.paused {
			spread = 5 * time.Second
		}
	}
	return hot, spread
}

// backpressure turns placements of low-priority due tasks into a hot local
// pool into jittered deferrals (DEFERRED_BACKPRESSURE).
func (c *Cell) backpressure(tasks []*task.Task, as []queue.Assignment) []queue.Assignment {
	hot, spread := c.hotPools()
	if len(hot) == 0 {
		return as
	}
	isHot := map[string]bool{}
	for _, h := range hot {
		isHot[h] = true
	}
	byID := make(map[string]*task.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
	}
	now := time.Now()
	for i, a := range as {
		t := byID[a.ID]
		if t == nil || a.Pool == "" || a.Region != "" || !isHot[a.Pool] || t.Priority < 3 || t.Critical {
			continue
		}
		as[i] = queue.Assignment{ID: a.ID, RetryAt: now.Add(jitterOf(a.ID, spread)), Reason: task.ReasonDeferred}
		c.metrics.deferred.WithLabelValues(c.cfg.Region).Inc()
	}
	return as
}

// jitterOf is a deterministic 50–100 % of d for an id.
func jitterOf(id string, d time.Duration) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(id))
	return d/2 + time.Duration(uint64(h.Sum32())%1000)*d/2000
}

// bucket is a token bucket (re-admission of preempted work).
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate, burst float64) *bucket {
	return &bucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// available refills and returns the whole tokens now (−1 when unlimited).
func (b *bucket) available(now time.Time) int {
	if b.rate <= 0 {
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	return int(b.tokens)
}

func (b *bucket) take(n int) {
	b.mu.Lock()
	b.tokens -= float64(n)
	b.mu.Unlock()
}

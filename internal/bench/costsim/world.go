package costsim

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/ax-sched/ax/placement"
)

// simTask is one submission of the day, the same for every policy.
type simTask struct {
	typ     int
	arrival float64 // seconds since the scenario's start
	home    int     // the region whose server took the submission
	base    float64 // run time in seconds before a pool's speed
}

// arrivals draws the day's submissions from the scenario's curves (thinning a Poisson process
// of each type's peak rate), ordered by time.
func arrivals(s *Scenario, seed uint64, regions int) []simTask {
	var out []simTask
	end := s.Length.Seconds()
	for ti, ty := range s.Types {
		rng := rand.New(rand.NewPCG(seed, uint64(ti)+1))
		if ty.Peak <= 0 {
			continue
		}
		for t := rng.ExpFloat64() / ty.Peak; t < end; t += rng.ExpFloat64() / ty.Peak {
			if rng.Float64()*ty.Peak > ty.Rate(time.Duration(t*float64(time.Second))) {
				continue
			}
			out = append(out, simTask{typ: ti, arrival: t, home: rng.IntN(regions),
				base: ty.Mean.Seconds() * math.Exp(ty.Sigma*rng.NormFloat64())})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].arrival < out[j].arrival })
	return out
}

// event kinds.
const (
	evArrive  = iota // a (re)submission of task a
	evLand           // task a lands in pool b after a hand-off
	evRefused        // the outbox gives up on task a's dead target and places it again
	evFinish         // the run with token b of pool a ends
	evTick           // every second: regions publish, pools claim, series sample
	evFail           // region a goes down
	evRecover        // region a is back
)

type event struct {
	at   float64
	seq  int
	kind int
	a, b int
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return e[i].at < e[j].at || (e[i].at == e[j].at && e[i].seq < e[j].seq)
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// run is a task running in a pool.
type run struct {
	task  int
	start float64
	price float64 // per slot-hour at the claim
}

// rtStat is a (pool, type) run time as queue/scripts/lib.lua's write_runtimes keeps it:
// integer milliseconds, a plain mean for the first 1/alpha runs, then a moving one.
type rtStat struct {
	n        int64
	mean, sd float64 // ms
}

const rtAlpha = 0.2 // queue.Options.RunTimeAlpha's default

func (r *rtStat) fold(seconds float64) {
	x := max(seconds, 0) * 1000
	r.n++
	w := max(rtAlpha, 1/float64(r.n))
	d := x - r.mean
	mean := r.mean + w*d
	v := (1 - w) * (r.sd*r.sd + w*d*d)
	r.mean, r.sd = math.Floor(mean+0.5), math.Floor(math.Sqrt(v)+0.5)
}

// simPool is a pool's true state in one policy's world.
type simPool struct {
	spec   *PoolSpec
	key    string
	region int
	tags   map[string]string
	queue  []int // task ids, FIFO from head
	head   int
	runs   map[int]run // by token
	done   int64       // runs ended (completions)
	meter  *placement.DrainMeter
	rts    []rtStat // by type
	// proj is, for hindsight, when each slot frees once all queued work is assigned (a min-heap
	// of slot free times; pools without a capacity window only).
	proj  floatHeap
	dirty bool // proj must be rebuilt
}

func (p *simPool) queued() int { return len(p.queue) - p.head }

func (p *simPool) push(task int) { p.queue = append(p.queue, task) }

func (p *simPool) pushFront(tasks []int) {
	q := append(append([]int{}, tasks...), p.queue[p.head:]...)
	p.queue, p.head = q, 0
}

func (p *simPool) pop() int {
	t := p.queue[p.head]
	p.head++
	if p.head > 1024 && p.head*2 > len(p.queue) {
		p.queue = append(p.queue[:0], p.queue[p.head:]...)
		p.head = 0
	}
	return t
}

// simRegion is one region's true state and what it last published.
type simRegion struct {
	name      string
	pools     []int
	down      bool
	downAt    float64
	backAt    float64 // when it came back (the view believes it a grace later)
	published bool
	pubAt     float64
	figs      []placement.Pool // last published, one per pool of the region
}

// unhealthyGrace is federation's grace before a view believes a region changed health
// (config placement.unhealthy_grace's default); a region coming back waits it out.
const unhealthyGrace = 10.0

type floatHeap []float64

func (h floatHeap) Len() int           { return len(h) }
func (h floatHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h floatHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *floatHeap) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *floatHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

var _ heap.Interface = (*floatHeap)(nil)

package worker

import (
	"context"
	"sort"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// slots is one of the worker's concurrency pools: a type's own
// (Options.TypeConcurrency), or the shared one (typ "") of every other
// type. Its room is counted in milli-slots (task.MilliSlots a slot): a
// task holds its SlotMilli of it while it runs, so four tasks of slots
// 0.25 run in one slot. Each has its own claim loop and idle wait, and claims only its
// types, so handlers of one type that all block hold only that type's
// slots: the others keep claiming and running.
type slots struct {
	typ   string        // "" the shared pool
	size  int           // milli-slots
	free  int           // milli-slots, under Worker.mu
	freed chan struct{} // a slot was freed (capacity 1)
	waker waiter        // the claim loop's idle wait, set by Run
	// counts: the last claim said the pool has a fair share
	// (queue.Claimed.Counts): the next claim waits for the successes
	// queued to be recorded. Claim loop only.
	counts bool
}

// newSlots builds the shared pool (first) and one per type of
// opts.TypeConcurrency, which take their slots out of Concurrency.
func newSlots(opts Options) []*slots {
	shared := opts.Concurrency
	types := make([]string, 0, len(opts.TypeConcurrency))
	for t, n := range opts.TypeConcurrency {
		types = append(types, t)
		shared -= n
	}
	sort.Strings(types)
	shared *= task.MilliSlots
	out := []*slots{{size: shared, free: shared, freed: make(chan struct{}, 1), counts: true}}
	for _, t := range types {
		n := opts.TypeConcurrency[t] * task.MilliSlots
		out = append(out, &slots{typ: t, size: n, free: n, freed: make(chan struct{}, 1), counts: true})
	}
	return out
}

// claimTypes is what a claim of g takes: a type's pool its type once a
// handler serves it; the shared pool every served type without a pool of
// its own (with HandleAny: every type, those with a pool of their own
// included, as the store's filter lists types to take, not to leave).
func (w *Worker) claimTypes(g *slots) queue.Types {
	w.hmu.RLock()
	defer w.hmu.RUnlock()
	if g.typ != "" {
		if w.handlers[g.typ] == nil && w.any == nil {
			return mustServe()
		}
		t, err := queue.ServeTypes(g.typ)
		if err != nil {
			return mustServe() // checked by Options already
		}
		return t
	}
	if len(w.groups) == 1 || w.any != nil {
		return w.served
	}
	var ts []string
	for _, t := range w.typesLocked() {
		if _, own := w.opts.TypeConcurrency[t]; !own {
			ts = append(ts, t)
		}
	}
	t, err := queue.ServeTypes(ts...)
	if err != nil {
		return mustServe()
	}
	return t
}

// reserve takes all of g's free room (milli-slots), waiting until some
// is free; with afterFree, it first waits for a task of g to end (the
// last claim found a task its room could not fit). It returns 0 when ctx
// ends first.
func (w *Worker) reserve(ctx context.Context, g *slots, afterFree bool) int {
	if afterFree {
		select {
		case <-ctx.Done():
			return 0
		case <-g.freed:
		}
	}
	for {
		w.mu.Lock()
		k := g.free
		g.free = 0
		w.mu.Unlock()
		if k > 0 {
			return k
		}
		select {
		case <-ctx.Done():
			return 0
		case <-g.freed:
		}
	}
}

// unreserve gives back the room a claim did not use, without waking the
// claim loop (nothing ended).
func (w *Worker) unreserve(g *slots, room int) {
	if room == 0 {
		return
	}
	w.mu.Lock()
	g.free += room
	w.mu.Unlock()
}

// release gives back the room (milli-slots) of a task of g that ended.
func (w *Worker) release(g *slots, room int) {
	if room <= 0 {
		return
	}
	w.mu.Lock()
	g.free += room
	w.mu.Unlock()
	select {
	case g.freed <- struct{}{}:
	default:
	}
}

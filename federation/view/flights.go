package view

import (
	"strconv"
	"sync"
	"time"
)

// Flights counts this server's placements that the target pool's published
// figures do not hold yet, so placement sees them.
//
// The placer's damping (placement.Placer) forgets its own placements into a
// pool as soon as newer figures of the pool arrive, assuming those figures
// hold them. They often do not: a task placed in another region waits in
// the home region's outbox until the target accepts it, for as long as the
// hand-off takes; and even a local task may be stored just after the leader
// read the counts it is about to publish. Without this correction a burst
// lands far past a pool's hard watermark, a little more at every publish.
//
// A flight counts from the first figures newer than those its placement was
// decided on (before that the placer's damping counts it) until the pool's
// region publishes figures newer than the moment the task landed in its
// store. A hand-off that another server of the region sends (Await) lands
// when it leaves the region's outbox, which that server's watch of the
// outbox reports (Awaited, Landed); flights that never land are forgotten
// after horizon.
type Flights struct {
	horizon time.Duration

	mu      sync.Mutex
	byID    map[string]flight // by task id, or by a reservation ticket until the id is known
	tickets uint64
}

type flight struct {
	region, pool string
	basis        time.Time // UpdatedAt of the figures the placement was decided on
	placed       time.Time
	landed       time.Time // when the task was in the target's store; zero while in flight
	await        bool      // a hand-off another server sends: watched in the outbox
}

func NewFlights(horizon time.Duration) *Flights {
	return &Flights{horizon: horizon, byID: map[string]flight{}}
}

// Reserve records a placement into region/pool, decided on figures
// published at basis, before its task is stored (the store makes its id): a
// view rebuilt meanwhile counts it already. It returns a ticket for bind or
// drop.
func (f *Flights) Reserve(region, pool string, basis, now time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickets++
	key := "\x00" + strconv.FormatUint(f.tickets, 10) // task ids never start with NUL
	f.byID[key] = flight{region: region, pool: pool, basis: basis, placed: now}
	return key
}

// Add records a placement of task id into region/pool, decided on figures
// published at basis.
func (f *Flights) Add(id, region, pool string, basis, now time.Time) {
	f.mu.Lock()
	f.byID[id] = flight{region: region, pool: pool, basis: basis, placed: now}
	f.mu.Unlock()
}

// Bind gives a reserved flight its task id.
func (f *Flights) Bind(ticket, id string) {
	f.mu.Lock()
	if fl, ok := f.byID[ticket]; ok {
		delete(f.byID, ticket)
		f.byID[id] = fl
	}
	f.mu.Unlock()
}

// Landed records that id was in its target's store at now (stored locally,
// or the receiver of its hand-off accepted it).
func (f *Flights) Landed(id string, now time.Time) {
	f.mu.Lock()
	if fl, ok := f.byID[id]; ok {
		fl.landed = now
		f.byID[id] = fl
	}
	f.mu.Unlock()
}

// Await marks id's flight as a hand-off another server of the region sends:
// it counts until Landed (its watcher saw it leave the outbox) or horizon.
func (f *Flights) Await(id string) {
	f.mu.Lock()
	if fl, ok := f.byID[id]; ok {
		fl.await = true
		f.byID[id] = fl
	}
	f.mu.Unlock()
}

// Awaited is the ids of the flights marked by Await that have not landed.
func (f *Flights) Awaited() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, fl := range f.byID {
		if fl.await && fl.landed.IsZero() {
			out = append(out, id)
		}
	}
	return out
}

// Drop forgets a flight, by task id or ticket: never stored, or its
// hand-off refused (it is placed again).
func (f *Flights) Drop(key string) {
	f.mu.Lock()
	delete(f.byID, key)
	f.mu.Unlock()
}

// missing returns, per "region/pool", the Flights that neither the figures
// published at updated[region] nor the placer's damping count, and forgets
// the Flights that are over.
func (f *Flights) missing(updated map[string]time.Time, now time.Time) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out map[string]int
	for key, fl := range f.byID {
		if now.Sub(fl.placed) > f.horizon {
			delete(f.byID, key)
			continue
		}
		u, ok := updated[fl.region]
		if !ok {
			continue
		}
		if !fl.landed.IsZero() && fl.landed.Before(u) {
			delete(f.byID, key) // the region's figures hold it now
			continue
		}
		if fl.basis.Before(u) {
			if out == nil {
				out = map[string]int{}
			}
			out[fl.region+"/"+fl.pool]++
		}
	}
	return out
}

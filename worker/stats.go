package worker

import "sync/atomic"

// Stats are a worker's counters since New.
type Stats struct {
	Claimed   uint64 // tasks claimed
	Succeeded uint64 // recorded SUCCESS
	Failed    uint64 // attempts recorded as failed (retried or dead)
	Canceled  uint64 // recorded CANCELED (cancel requested while running)
	Returned  uint64 // given back without spending a retry (shutdown, preemption)
	Lost      uint64 // dropped: the lease was lost, the outcome is not ours
	Running   int    // handlers running now
	InFlight  int    // claimed and not yet settled (running or being recorded)
}

type counters struct {
	claimed, succeeded, failed, canceled, returned, lost atomic.Uint64
	running                                              atomic.Int64
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	inflight := len(w.held)
	w.mu.Unlock()
	return Stats{
		Claimed:   w.stats.claimed.Load(),
		Succeeded: w.stats.succeeded.Load(),
		Failed:    w.stats.failed.Load(),
		Canceled:  w.stats.canceled.Load(),
		Returned:  w.stats.returned.Load(),
		Lost:      w.stats.lost.Load(),
		Running:   int(w.stats.running.Load()),
		InFlight:  inflight,
	}
}

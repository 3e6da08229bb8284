package workers

import (
	"sync"
	"time"
)

// beats remembers when this server last recorded each remote worker alive
// in its pool (the store's heartbeat), so that a report with no lease to
// extend does not record it again within a fraction of the heartbeat: the
// store keeps a worker alive for a whole lease, longer than a heartbeat.
// Safe for concurrent use; it forgets workers unseen for a minute once it
// holds more than maxBeats.
type beats struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const maxBeats = 4096

// due reports whether worker id's liveness should be recorded now: never
// recorded here, or longer than every ago.
func (b *beats) due(id string, every time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.last[id]
	return !ok || time.Since(t) >= every
}

// mark records that worker id was recorded alive now.
func (b *beats) mark(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		b.last = map[string]time.Time{}
	}
	if len(b.last) >= maxBeats {
		for k, t := range b.last {
			if time.Since(t) > time.Minute {
				delete(b.last, k)
			}
		}
	}
	b.last[id] = time.Now()
}

// forget drops worker id (it left).
func (b *beats) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.last, id)
}

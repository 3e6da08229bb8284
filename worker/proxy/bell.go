package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue/claim"
)

// bells lets every claim waiting on this server for a pool share one
// wait for the pool's wake-up markers: a bell per pool rings all of them
// when a marker comes, so a thousand waiting workers cost one blocking
// Redis pop, not a thousand. A bell's goroutine runs only while someone
// waits and ends when the last waiter leaves.
type bells struct {
	claimer *claim.Claimer
	mu      sync.Mutex
	by      map[string]*bell
}

type bell struct {
	waiters int
	rung    chan struct{} // closed and replaced at each ring
}

func newBells(c *claim.Claimer) *bells { return &bells{claimer: c, by: map[string]*bell{}} }

// bellPoll bounds one wait of a bell's pop: how soon it notices that its
// waiters left.
const bellPoll = time.Second

// wait blocks until pool's bell rings (true), timeout passes or ctx ends.
func (b *bells) wait(ctx context.Context, pool string, timeout time.Duration) bool {
	b.mu.Lock()
	bl := b.by[pool]
	if bl == nil {
		bl = &bell{rung: make(chan struct{})}
		b.by[pool] = bl
		go b.ring(pool, bl)
	}
	bl.waiters++
	ch := bl.rung
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		bl.waiters--
		b.mu.Unlock()
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// ring pops pool's wake-up markers while bl has waiters, ringing for each.
func (b *bells) ring(pool string, bl *bell) {
	w := b.claimer.NewWaker(pool)
	defer w.Close()
	for {
		b.mu.Lock()
		if bl.waiters == 0 {
			delete(b.by, pool)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		woken, err := w.Wait(context.Background(), bellPoll)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if woken {
			b.mu.Lock()
			close(bl.rung)
			bl.rung = make(chan struct{})
			b.mu.Unlock()
		}
	}
}

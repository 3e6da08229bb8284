package claim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/redis/go-redis/v9"
)

// Waker is the idle wait of one claimer of a pool: Wait blocks until a
// wake-up marker of the pool appears on any shard (scripts leave one when
// READY work arrives), a timeout passes, or ctx ends. Create it with
// NewWaker and Close it.
//
// On one Redis every shard's marker list is on the same server and Wait is
// one BLPOP over all of them. On a Redis Cluster the lists hash to
// different slots, which one command cannot name (CROSSSLOT): the Waker
// then keeps one blocking pop per shard running, each on a connection of its
// own to the master serving that shard, and merges them. As with the one
// BLPOP, a Wait takes one marker: a pop runs only while a Wait is waiting
// (or finishing the pop it started for one), and a marker taken beyond one
// per waiter, or after every waiter left, is given back at once (the
// script's own one-marker rule), so no marker is taken without a claimer to
// hear it: another idle claimer of the pool still wakes. A pop that gave a
// marker back pops again only for the next Wait, not to take it again.
//
// Close stops the pops (CLIENT UNBLOCK) and waits for their goroutines.
type Waker struct {
	s    *queue.Engine
	pool string
	keys []string // every shard's wake key

	// Cluster mode only.
	mu      sync.Mutex
	waiters int
	open    chan struct{} // closed while waiters > 0: pops may run
	ended   chan struct{} // closed when waiters drop back to 0
	pending []int         // shards whose marker was taken for the waiters, ≤ waiters
	err     error         // a pop's failure, for the waiters
	signal  chan struct{} // cap 1: pending or err changed
	conns   []*queue.BlockingConn
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// wakerBlock is how long one pop of a cluster Waker blocks. Whole seconds
// (go-redis rounds a blocking pop's timeout to them); it bounds how long a
// pop runs on after its waiter left, and Close's wait should an unblock
// fail.
const WakerBlock = time.Second

// NewWaker returns a Waker for pool. On a cluster it starts one goroutine
// per shard; they pop only while someone waits.
func (s *Claimer) NewWaker(pool string) *Waker {
	w := &Waker{s: s.Engine, pool: pool, keys: make([]string, s.Shards())}
	for i := range w.keys {
		w.keys[i] = queue.WakeKey(s.Prefix(i), pool)
	}
	if s.OneNode() {
		return w
	}
	w.open = make(chan struct{})
	w.signal = make(chan struct{}, 1)
	w.stop = make(chan struct{})
	w.conns = make([]*queue.BlockingConn, s.Shards())
	for shard := range s.Shards() {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.popLoop(shard) }()
	}
	return w
}

// Wait blocks until a wake-up marker for the pool is taken (true), timeout
// passes or ctx ends (false). An error says the wait failed (Redis
// unreachable): back off, then claim.
func (w *Waker) Wait(ctx context.Context, timeout time.Duration) (bool, error) {
	if w.stop == nil {
		return w.s.PopAny(ctx, w.keys, timeout)
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false, errors.New("queue: wait for work: waker closed")
	}
	if woken, err := w.takeLocked(); woken || err != nil {
		w.mu.Unlock()
		return woken, err
	}
	w.waiters++
	if w.waiters == 1 {
		w.ended = make(chan struct{})
		close(w.open)
	}
	w.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-w.signal:
			w.mu.Lock()
			woken, err := w.takeLocked()
			if woken || err != nil {
				w.leaveLocked()
				if len(w.pending) > 0 {
					w.notify() // another waiter's marker: one signal wakes one waiter
				}
				w.mu.Unlock()
				return woken, err
			}
			w.mu.Unlock()
		case <-timer.C:
			w.leave(ctx)
			return false, nil
		case <-ctx.Done():
			w.leave(ctx)
			return false, nil
		}
	}
}

// takeLocked consumes what the pops found: woken when a marker was taken
// (one: the others are other waiters'), else a pop's error.
func (w *Waker) takeLocked() (bool, error) {
	if len(w.pending) > 0 {
		w.pending = w.pending[1:]
		return true, nil
	}
	if err := w.err; err != nil {
		w.err = nil
		return false, fmt.Errorf("queue: wait for work: %w", err)
	}
	return false, nil
}

func (w *Waker) leaveLocked() {
	w.waiters--
	if w.waiters == 0 {
		close(w.ended)
		w.open = make(chan struct{})
	}
}

// leave ends a wait that heard nothing. Markers taken for it in the
// meantime are given back.
func (w *Waker) leave(ctx context.Context) {
	w.mu.Lock()
	w.leaveLocked()
	var back []int
	if n := len(w.pending) - w.waiters; n > 0 {
		// More markers than waiters now: the extra are other claimers'.
		back = append(back, w.pending[w.waiters:]...)
		w.pending = w.pending[:w.waiters]
	}
	w.mu.Unlock()
	for _, shard := range back {
		w.giveBack(ctx, shard)
	}
}

// popLoop is shard's pop: while someone waits, BLPOP the shard's wake key
// on a connection of its own.
func (w *Waker) popLoop(shard int) {
	fails := 0
	for {
		w.mu.Lock()
		open := w.open
		w.mu.Unlock()
		select {
		case <-w.stop:
			w.dropConn(shard)
			return
		case <-open:
		}
		found, err := w.pop(shard)
		switch {
		case err != nil:
			w.dropConn(shard)
			fails++
			w.mu.Lock()
			if w.waiters > 0 { // an error no one heard is stale by the next wait
				w.err = err
			}
			w.mu.Unlock()
			w.notify()
			select {
			case <-w.stop:
				return
			case <-time.After(min(50*time.Millisecond<<min(fails-1, 5), 2*time.Second)):
			}
		case found:
			fails = 0
			w.mu.Lock()
			deliver := len(w.pending) < w.waiters
			var ended chan struct{}
			if deliver {
				w.pending = append(w.pending, shard)
			} else if w.waiters > 0 {
				ended = w.ended
			}
			w.mu.Unlock()
			if deliver {
				w.notify()
				continue
			}
			w.giveBack(context.Background(), shard)
			if ended != nil {
				// Every waiter has its marker: this one is for another
				// claimer. Popping it again now would only take it back.
				select {
				case <-w.stop:
					w.dropConn(shard)
					return
				case <-ended:
				}
			}
		default:
			fails = 0
		}
	}
}

// pop runs one BLPOP on shard's connection, opening it first if needed.
func (w *Waker) pop(shard int) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), WakerBlock+5*time.Second)
	defer cancel()
	w.mu.Lock()
	bc := w.conns[shard]
	w.mu.Unlock()
	if bc == nil {
		var err error
		if bc, err = w.s.BlockingConn(ctx, shard); err != nil {
			return false, err
		}
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			bc.Close()
			return false, nil
		}
		w.conns[shard] = bc
		w.mu.Unlock()
	}
	err := bc.C.BLPop(ctx, WakerBlock, w.keys[shard]).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err == nil:
		return true, nil
	case queue.IsMoved(err):
		// The slot moved: learn where before opening the next connection.
		w.s.Cluster().ReloadState(ctx)
	}
	return false, err
}

func (w *Waker) dropConn(shard int) {
	w.mu.Lock()
	bc := w.conns[shard]
	w.conns[shard] = nil
	w.mu.Unlock()
	if bc != nil {
		bc.Close()
	}
}

func (w *Waker) notify() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// giveBack leaves the marker a pop took without a waiter to hear it.
func (w *Waker) giveBack(ctx context.Context, shard int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	// Should this fail, claimers still wake on their safety timeout.
	_ = w.s.Run(ctx, w.s.Client(), queue.Scripts.Rewake, w.s.KeysWith(shard), w.s.Clock(), w.pool).Err()
}

// Close stops the pops and waits for them. Wait calls after it fail.
// Safe to call more than once.
func (w *Waker) Close() {
	if w.stop == nil {
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.stop)
	w.mu.Unlock()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	for {
		// A pop that reached Redis after an unblock blocks on: unblock
		// again until every goroutine returned.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		w.mu.Lock()
		conns := append([]*queue.BlockingConn(nil), w.conns...)
		w.mu.Unlock()
		for _, bc := range conns {
			if bc != nil {
				_ = bc.Unblock(ctx)
			}
		}
		cancel()
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoSession: the Manager has no live session at the moment; the value is
// kept and written as soon as it has one.
var ErrNoSession = errors.New("lease: no live session")

// A Registration is a key bound to a Manager's session lease: it exists
// while its owner is alive and vanishes with the lease when the owner dies.
// When the Manager replaces its session, the registration writes the key
// again under the new lease, by the one goroutine it owns.
//
// It does not guard against someone else deleting or overwriting the key
// while the lease lives; Update rewrites it.
type Registration struct {
	m      *Manager
	key    string
	stop   context.CancelFunc
	exited chan struct{}
	kick   chan struct{} // a write is pending

	mu      sync.Mutex // serialises writes; guards the fields below
	value   []byte
	written clientv3.LeaseID // lease of the last successful write
	dirty   bool             // value changed since that write
}

// Register waits for a session of m, writes key=value bound to its lease,
// and keeps it written across session replacements until Close.
func Register(ctx context.Context, m *Manager, key string, value []byte) (*Registration, error) {
	s, err := m.Session(ctx)
	if err != nil {
		return nil, fmt.Errorf("lease: register %s: %w", key, err)
	}
	r := &Registration{m: m, key: key, value: bytes.Clone(value), exited: make(chan struct{}), kick: make(chan struct{}, 1)}
	r.mu.Lock()
	err = r.put(ctx, s)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go r.run(rctx)
	return r, nil
}

// put writes the value under s's lease; r.mu is held.
func (r *Registration) put(ctx context.Context, s *Session) error {
	cctx, cancel := r.m.o.call(ctx)
	defer cancel()
	if _, err := s.c.Put(cctx, r.key, string(r.value), clientv3.WithLease(s.Lease())); err != nil {
		return fmt.Errorf("lease: register %s: %w", r.key, err)
	}
	r.written, r.dirty = s.Lease(), false
	return nil
}

func (r *Registration) run(ctx context.Context) {
	defer close(r.exited)
	bo := newBackoff(50*time.Millisecond, max(r.m.o.ttl/2, time.Second))
	for {
		s, changed := r.m.Current()
		var retry <-chan time.Time
		if s != nil {
			r.mu.Lock()
			var err error
			if r.dirty || r.written != s.Lease() {
				err = r.put(ctx, s)
			}
			r.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				r.m.o.logger.Warn("registration write failed, retrying", "key", r.key, "err", err)
				retry = time.After(bo.next())
			} else {
				bo.reset()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-r.kick:
		case <-retry:
		}
	}
}

// Key is the registered key.
func (r *Registration) Key() string { return r.key }

// Update rewrites the value now under the current lease. On failure the new
// value is kept and the registration's goroutine keeps trying to write it.
func (r *Registration) Update(ctx context.Context, value []byte) error {
	r.mu.Lock()
	r.value, r.dirty = bytes.Clone(value), true
	s, _ := r.m.Current()
	err := ErrNoSession
	if s != nil {
		err = r.put(ctx, s)
	}
	r.mu.Unlock()
	if err != nil {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return err
}

// Close stops the goroutine, waits for it, and deletes the key if it is
// still bound to the lease of our last successful write.
func (r *Registration) Close(ctx context.Context) error {
	r.stop()
	select {
	case <-r.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written == clientv3.NoLease {
		return nil
	}
	cctx, cancel := r.m.o.call(ctx)
	defer cancel()
	_, err := r.m.c.Txn(cctx).
		If(clientv3.Compare(clientv3.LeaseValue(r.key), "=", r.written)).
		Then(clientv3.OpDelete(r.key)).
		Commit()
	if err != nil {
		return fmt.Errorf("lease: unregister %s: %w", r.key, err)
	}
	r.written = clientv3.NoLease
	return nil
}

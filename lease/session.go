package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Why a session ended (Session.Err).
var (
	// ErrSessionClosed: the owner called Close or Orphan.
	ErrSessionClosed = errors.New("lease: session closed")
	// ErrLeaseExpired: etcd no longer knows the lease (it expired or was revoked).
	ErrLeaseExpired = errors.New("lease: lease expired or revoked")
	// ErrKeepAliveTimeout: no renewal succeeded before the Deadline, so the
	// lease may soon expire on the server. Declared locally, without waiting
	// for etcd to answer (it may be stalled or unreachable).
	ErrKeepAliveTimeout = errors.New("lease: no keepalive within the TTL")
	// ErrManagerClosed: the Manager was closed.
	ErrManagerClosed = errors.New("lease: session manager closed")
)

// A Session is one etcd lease kept alive by one goroutine that the session
// owns. It ends when its owner closes it, when etcd reports the lease gone,
// or at its Deadline when no renewal has succeeded; it never comes back
// (Manager makes a new one). Keys written with the session's Lease vanish
// when the lease expires or is revoked.
type Session struct {
	c   *clientv3.Client
	id  clientv3.LeaseID
	ttl time.Duration
	o   options

	ctx    context.Context // cancelled (with the reason as cause) when the session ends
	cancel context.CancelCauseFunc
	exited chan struct{} // closed when the keepalive goroutine has returned

	mu       sync.Mutex
	deadline time.Time
}

// NewSession grants a lease of the configured TTL (WithTTL) and starts
// keeping it alive. ctx bounds only the grant.
func NewSession(ctx context.Context, c *clientv3.Client, opts ...Option) (*Session, error) {
	o := newOptions(opts)
	sent := time.Now()
	gctx, cancel := o.call(ctx)
	resp, err := c.Grant(gctx, ttlSeconds(o.ttl))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("lease: grant: %w", err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	sctx, scancel := context.WithCancelCause(context.Background())
	s := &Session{
		c: c, id: resp.ID, ttl: ttl, o: o,
		ctx: sctx, cancel: scancel, exited: make(chan struct{}),
		deadline: expiry(sent, ttl),
	}
	go s.keepAlive()
	return s, nil
}

// expiry is the local bound on the server-side expiry of a lease renewed
// (or granted) by a request sent at sent: the server counts the TTL from
// when it received the request, later. A tenth of the TTL is kept as margin
// for late timers and clock-rate error, so that a stalled holder gives up
// before etcd can hand its keys to someone else.
func expiry(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - ttl/10)
}

func ttlSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// keepAlive renews the lease every TTL/3 with one KeepAliveOnce request
// each, rather than the client's KeepAlive stream: knowing when each renewal
// was *sent* gives a safe local bound on the server-side expiry (sent + TTL),
// which is what lets a leader step down on an etcd stall before another
// candidate can be elected. The lessor's stream only says when an answer
// arrived, and it keeps retrying silently.
func (s *Session) keepAlive() {
	defer close(s.exited)
	interval := s.ttl / 3
	retry := max(interval/4, 20*time.Millisecond)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		}
		sent := time.Now()
		left := s.Deadline().Sub(sent)
		if left <= 0 {
			s.cancel(ErrKeepAliveTimeout)
			return
		}
		cctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(s.ctx), min(interval, left))
		resp, err := s.c.KeepAliveOnce(cctx, s.id)
		cancel()
		switch {
		case err == nil:
			s.mu.Lock()
			s.deadline = expiry(sent, time.Duration(resp.TTL)*time.Second)
			s.mu.Unlock()
			timer.Reset(max(0, interval-time.Since(sent)))
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.cancel(ErrLeaseExpired)
			return
		case s.ctx.Err() != nil:
			return
		default:
			s.o.logger.Debug("keepalive failed", "lease", fmt.Sprintf("%x", int64(s.id)), "err", err)
			timer.Reset(min(retry, max(0, time.Until(s.Deadline()))))
		}
	}
}

// Client is the etcd client of the session.
func (s *Session) Client() *clientv3.Client { return s.c }

// Lease is the lease id; bind keys to it with clientv3.WithLease.
func (s *Session) Lease() clientv3.LeaseID { return s.id }

// TTL is the TTL etcd granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Deadline is when the session ends unless a renewal succeeds first: the
// send time of the last successful renewal plus 0.9 TTL, before the
// server can expire the lease.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Ctx is cancelled when the session ends; derive work from it that must stop
// with the lease.
func (s *Session) Ctx() context.Context { return s.ctx }

// Err is nil while the session lives, then why it ended: ErrSessionClosed,
// ErrLeaseExpired or ErrKeepAliveTimeout.
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// Orphan stops renewing without revoking: the lease expires after its TTL.
// It waits for the keepalive goroutine to return.
func (s *Session) Orphan() {
	s.cancel(ErrSessionClosed)
	<-s.exited
}

// Close stops renewing and revokes the lease, deleting every key bound to
// it. A lease that is already gone is not an error.
func (s *Session) Close(ctx context.Context) error {
	s.Orphan()
	cctx, cancel := s.o.call(ctx)
	defer cancel()
	_, err := s.c.Revoke(cctx, s.id)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("lease: revoke %x: %w", int64(s.id), err)
	}
	return nil
}

// A Manager keeps one live Session at all times: when the current one ends
// (lease expired or revoked, keepalive stalled, etcd restarted) it closes
// the stale one and grants a new one, retrying with backoff while etcd is
// unreachable. Registrations built on a Manager follow it to each new lease.
//
// Each Session, Manager, Leadership, Registration and View owns exactly one
// goroutine, started by its constructor and stopped and waited for by its
// Close (Leadership: Resign). Shut down from the top: leader functions and
// Elector.Run (cancel their context), then Registrations and Views, then
// Managers, then the etcd clients; a Registration closed after its Manager
// finds its key already gone with the revoked lease.
type Manager struct {
	c      *clientv3.Client
	opts   []Option
	o      options
	stop   context.CancelFunc
	exited chan struct{}

	mu      sync.Mutex
	cur     *Session
	changed chan struct{} // closed when cur changes
	closed  bool
}

// NewManager starts a manager and its goroutine; Close stops it.
func NewManager(c *clientv3.Client, opts ...Option) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		c: c, opts: opts, o: newOptions(opts),
		stop: cancel, exited: make(chan struct{}), changed: make(chan struct{}),
	}
	go m.run(ctx)
	return m
}

func (m *Manager) run(ctx context.Context) {
	defer close(m.exited)
	bo := newBackoff(50*time.Millisecond, max(m.o.ttl/2, time.Second))
	for {
		s, err := NewSession(ctx, m.c, m.opts...)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.o.logger.Warn("etcd session: grant failed, retrying", "err", err)
			if !sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		bo.reset()
		m.set(s)
		select {
		case <-ctx.Done():
			return // Close revokes m.cur
		case <-s.Done():
		}
		m.o.logger.Warn("etcd session lost, starting a new one", "lease", fmt.Sprintf("%x", int64(s.Lease())), "reason", s.Err())
		m.set(nil)
		// Revoke in case the server still holds the lease (a stall): its keys
		// vanish now instead of after the TTL.
		cctx, cancel := context.WithTimeout(ctx, m.o.callTimeout)
		_ = s.Close(cctx)
		cancel()
	}
}

func (m *Manager) set(s *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.cur = s
	close(m.changed)
	m.changed = make(chan struct{})
}

// Current returns the live session (nil while a new one is being granted)
// and a channel closed when that answer changes: the session is lost or
// replaced. After Close it returns nil and a channel that never closes.
func (m *Manager) Current() (*Session, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur, m.changed
}

// Session waits for a live session.
func (m *Manager) Session(ctx context.Context) (*Session, error) {
	for {
		m.mu.Lock()
		s, changed, closed := m.cur, m.changed, m.closed
		m.mu.Unlock()
		if closed {
			return nil, ErrManagerClosed
		}
		if s != nil && s.Err() == nil {
			return s, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TTL is the configured session TTL.
func (m *Manager) TTL() time.Duration { return m.o.ttl }

// Close stops the manager's goroutine, waits for it, then revokes the
// current session. Close registrations and leaderships first if their keys
// should be deleted one by one rather than with the lease.
func (m *Manager) Close(ctx context.Context) error {
	m.stop()
	select {
	case <-m.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	m.mu.Lock()
	s := m.cur
	if !m.closed {
		m.closed = true
		m.cur = nil
		close(m.changed)
		m.changed = make(chan struct{})
	}
	m.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close(ctx)
}

package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Election errors.
var (
	// ErrNotLeader: the leader key is gone or is no longer ours.
	ErrNotLeader = errors.New("lease: not the leader")
	// ErrNoLeader: nobody holds the election (Observe).
	ErrNoLeader = errors.New("lease: no leader")
	// ErrResigned: the leader resigned (Leadership.Err after Resign).
	ErrResigned = errors.New("lease: resigned")
	// ErrLeaderKeyDeleted: someone deleted the leader key.
	ErrLeaderKeyDeleted = errors.New("lease: leader key deleted")
	// ErrLost: Lost was called without a reason.
	ErrLost = errors.New("lease: leadership given up")
)

// Probe errors (Probe.Err).
var (
	// ErrProbePending: the probe has not had its first answer yet.
	ErrProbePending = errors.New("lease: probe: no answer yet")
	// ErrProbeStale: the last good answer is older than the probe allows
	// (a call is stuck, as behind a partition).
	ErrProbeStale = errors.New("lease: probe: no recent answer")
)

// Leadership is one term as leader of an election. It is valid until Done
// is closed; its Token orders terms (a later term has a higher token), which
// is what fenced writes compare.
type Leadership struct {
	s     *Session
	key   string
	token int64

	ctx    context.Context // cancelled, with the reason as cause, when the term ends
	cancel context.CancelCauseFunc
	stop   func() bool   // unregisters the session watch
	exited chan struct{} // closed when the key watcher has returned
}

// Campaign waits until s holds the election under prefix (for instance
// "/ax/elect/region/eu-west"), with value as the leader's announced value
// (its id or address). It returns an error when ctx ends, when the session
// ends while waiting, or when an etcd request fails; the candidate key is
// then withdrawn (or goes with the session). A session that has ended is
// never reused: campaign again with a new one.
//
// The returned Leadership is watched by one goroutine that it owns; call
// Resign when done with it, also after it was lost.
func Campaign(ctx context.Context, s *Session, prefix, value string) (*Leadership, error) {
	pfx := strings.TrimSuffix(prefix, "/") + "/"
	key := fmt.Sprintf("%s%x", pfx, int64(s.Lease()))
	c, o := s.c, s.o

	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("lease: campaign: %w", err)
	}
	// Waiting must stop when the session ends, not only when ctx does.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(s.Err()) })
	defer stop()

	cctx, ccancel := o.call(ctx)
	resp, err := c.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(s.Lease()))).
		Else(clientv3.OpGet(key)).
		Commit()
	ccancel()
	if err != nil {
		return nil, campaignErr(ctx, err)
	}
	rev := resp.Header.Revision
	if !resp.Succeeded {
		// Our key from an earlier campaign on this session: keep its place.
		kv := resp.Responses[0].GetResponseRange().Kvs[0]
		rev = kv.CreateRevision
		if string(kv.Value) != value {
			cctx, ccancel := o.call(ctx)
			_, err := c.Txn(cctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
				Then(clientv3.OpPut(key, value, clientv3.WithLease(s.Lease()))).
				Commit()
			ccancel()
			if err != nil {
				withdraw(s, key, rev)
				return nil, campaignErr(ctx, err)
			}
		}
	}

	if err := waitDeletes(ctx, s, pfx, rev-1); err != nil {
		withdraw(s, key, rev)
		return nil, campaignErr(ctx, err)
	}

	// etcd-io/etcd#11051: the wait above can end with success after our own
	// key expired with the session (waitDeletes only looks at older keys).
	// Check the session is alive and the key is still ours before claiming.
	cctx, ccancel = o.call(ctx)
	got, err := c.Get(cctx, key)
	ccancel()
	if err != nil {
		withdraw(s, key, rev)
		return nil, campaignErr(ctx, err)
	}
	if len(got.Kvs) == 0 || got.Kvs[0].Lease != int64(s.Lease()) || got.Kvs[0].CreateRevision != rev {
		return nil, fmt.Errorf("lease: campaign: %w", ErrNotLeader)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("lease: campaign: %w", err)
	}

	lctx, lcancel := context.WithCancelCause(context.Background())
	l := &Leadership{s: s, key: key, token: rev, ctx: lctx, cancel: lcancel, exited: make(chan struct{})}
	l.stop = context.AfterFunc(s.ctx, func() {
		lcancel(fmt.Errorf("lease: leadership lost: session ended: %w", s.Err()))
	})
	go l.watch(got.Header.Revision + 1)
	return l, nil
}

// campaignErr names why a campaign stopped: the session's end when that is
// what cancelled the wait.
func campaignErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
		if !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
			err = cause
		}
	}
	return fmt.Errorf("lease: campaign: %w", err)
}

// withdraw deletes our candidate key if the session still lives; otherwise
// the key goes with the lease.
func withdraw(s *Session, key string, rev int64) {
	if s.Err() != nil {
		return
	}
	ctx, cancel := s.o.call(context.Background())
	defer cancel()
	_, _ = s.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit()
}

// waitDeletes returns once no key under pfx has a create revision ≤ maxRev:
// every earlier candidate is gone, so we lead.
func waitDeletes(ctx context.Context, s *Session, pfx string, maxRev int64) error {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(maxRev))
	for {
		cctx, cancel := s.o.call(ctx)
		resp, err := s.c.Get(cctx, pfx, opts...)
		cancel()
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := waitDelete(ctx, s.c, string(resp.Kvs[0].Key), resp.Header.Revision+1); err != nil {
			return err
		}
	}
}

// waitDelete returns nil when key is deleted or the watch breaks (the caller
// looks again), and ctx's error when ctx ends.
func waitDelete(ctx context.Context, c *clientv3.Client, key string, fromRev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range c.Watch(wctx, key, clientv3.WithRev(fromRev)) {
		if wr.Canceled || wr.Err() != nil {
			break
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	// Broken watch (no leader, compaction, reconnect): pause so a failing
	// cluster is not hammered, then let the caller look again.
	if !sleep(ctx, 100*time.Millisecond) {
		return ctx.Err()
	}
	return nil
}

// watch follows the leader key from fromRev and ends the term when the key
// is deleted. When the watch breaks it reads the key again and resumes;
// the session's own deadline covers an etcd that stops answering.
func (l *Leadership) watch(fromRev int64) {
	defer close(l.exited)
	bo := newBackoff(50*time.Millisecond, time.Second)
	for l.ctx.Err() == nil {
		if reason := l.follow(fromRev); reason != nil {
			l.cancel(reason)
			return
		}
		for l.ctx.Err() == nil {
			if !sleep(l.ctx, bo.next()) {
				return
			}
			cctx, cancel := l.s.o.call(l.ctx)
			resp, err := l.s.c.Get(cctx, l.key)
			cancel()
			if err != nil {
				l.s.o.logger.Debug("leader key check failed", "key", l.key, "err", err)
				continue
			}
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.token {
				l.cancel(fmt.Errorf("lease: leadership lost: %w", ErrLeaderKeyDeleted))
				return
			}
			bo.reset()
			fromRev = resp.Header.Revision + 1
			break
		}
	}
}

// follow watches the key; it returns the reason the term ended, or nil when
// the watch broke or the term ended elsewhere.
func (l *Leadership) follow(fromRev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(l.ctx))
	defer cancel()
	for wr := range l.s.c.Watch(wctx, l.key, clientv3.WithRev(fromRev)) {
		if wr.Canceled || wr.Err() != nil {
			return nil
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != l.token {
				return fmt.Errorf("lease: leadership lost: %w", ErrLeaderKeyDeleted)
			}
		}
	}
	return nil
}

// Token is the fencing token: the create revision of the leader key. Every
// term of an election has a higher token than the terms before it.
func (l *Leadership) Token() int64 { return l.token }

// Key is the leader key.
func (l *Leadership) Key() string { return l.key }

// Session is the session the term is bound to.
func (l *Leadership) Session() *Session { return l.s }

// Done is closed the moment the term ends: the session ended (lease expired,
// revoked, keepalive stalled for a TTL), the key was deleted, or Resign or
// Lost was called.
func (l *Leadership) Done() <-chan struct{} { return l.ctx.Done() }

// Ctx is cancelled when the term ends; run leader-only work under it.
func (l *Leadership) Ctx() context.Context { return l.ctx }

// Err is nil during the term, then why it ended.
func (l *Leadership) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Cmp is true in an etcd transaction only while this term holds the
// election: guard leader-only etcd writes with it.
func (l *Leadership) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.token)
}

// Lost ends the term at once because the caller learnt it is no longer
// leader, typically a fenced write rejected because a higher token was
// seen. Done closes before Lost returns; Resign then withdraws the key so
// another candidate takes over without waiting for the TTL.
func (l *Leadership) Lost(reason error) {
	if reason == nil {
		reason = ErrLost
	}
	l.cancel(fmt.Errorf("lease: leadership lost: %w", reason))
}

// Proclaim announces a new value without a new election. It fails with
// ErrNotLeader, and ends the term, if the key is no longer ours.
func (l *Leadership) Proclaim(ctx context.Context, value string) error {
	if err := l.Err(); err != nil {
		return err
	}
	cctx, cancel := l.s.o.call(ctx)
	defer cancel()
	resp, err := l.s.c.Txn(cctx).
		If(l.Cmp()).
		Then(clientv3.OpPut(l.key, value, clientv3.WithLease(l.s.Lease()))).
		Commit()
	if err != nil {
		return fmt.Errorf("lease: proclaim: %w", err)
	}
	if !resp.Succeeded {
		l.cancel(fmt.Errorf("lease: leadership lost: %w", ErrNotLeader))
		return ErrNotLeader
	}
	return nil
}

// Resign ends the term (if it has not ended), waits for the watcher
// goroutine, and deletes the leader key if it is still this term's. Call it
// once the term is over too: it releases the watcher and hands the election
// on without waiting for the lease to expire.
func (l *Leadership) Resign(ctx context.Context) error {
	l.cancel(ErrResigned)
	l.stop()
	select {
	case <-l.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	cctx, cancel := l.s.o.call(ctx)
	defer cancel()
	if _, err := l.s.c.Txn(cctx).If(l.Cmp()).Then(clientv3.OpDelete(l.key)).Commit(); err != nil {
		return fmt.Errorf("lease: resign: %w", err)
	}
	return nil
}

// Leader is the holder of an election as seen by Observe.
type Leader struct {
	Key   string
	Value string
	Token int64 // the leader key's create revision
	Lease clientv3.LeaseID
}

// Observe returns the current leader of the election under prefix, or
// ErrNoLeader. The oldest candidate is the leader (or becomes it as soon as
// it notices), so this is one read.
func Observe(ctx context.Context, c *clientv3.Client, prefix string, opts ...Option) (Leader, error) {
	o := newOptions(opts)
	pfx := strings.TrimSuffix(prefix, "/") + "/"
	cctx, cancel := o.call(ctx)
	defer cancel()
	resp, err := c.Get(cctx, pfx, clientv3.WithFirstCreate()...)
	if err != nil {
		return Leader{}, fmt.Errorf("lease: observe %s: %w", prefix, err)
	}
	if len(resp.Kvs) == 0 {
		return Leader{}, ErrNoLeader
	}
	kv := resp.Kvs[0]
	return Leader{Key: string(kv.Key), Value: string(kv.Value), Token: kv.CreateRevision, Lease: clientv3.LeaseID(kv.Lease)}, nil
}

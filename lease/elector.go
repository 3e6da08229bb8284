package lease

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// An Elector campaigns in one election for as long as Run runs, with a new
// session for every term: a session that carried a lost term (or died while
// waiting) is revoked, never reused, so a new term always gets a new key
// and a higher token.
type Elector struct {
	c      *clientv3.Client
	prefix string
	value  string
	opts   []Option
	o      options
}

// NewElector prepares an elector for the election under prefix, announcing
// value (the candidate's id or address). Options: WithTTL, WithCallTimeout,
// WithLogger.
func NewElector(c *clientv3.Client, prefix, value string, opts ...Option) *Elector {
	return &Elector{c: c, prefix: prefix, value: value, opts: opts, o: newOptions(opts)}
}

// Run campaigns until ctx ends. Each time it is elected it calls lead in
// Run's own goroutine with a context cancelled when the term ends (or ctx
// does); lead must return promptly then. When lead returns, Run resigns,
// revokes the term's session and campaigns again, after a pause if the term
// was lost. A lead that returns on its own gives up the term the same way.
// Run returns ctx's error.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, l *Leadership)) error {
	bo := newBackoff(100*time.Millisecond, max(e.o.ttl, time.Second))
	for ctx.Err() == nil {
		s, err := NewSession(ctx, e.c, e.opts...)
		if err != nil {
			e.o.logger.Warn("election: no session, retrying", "election", e.prefix, "err", err)
			sleep(ctx, bo.next())
			continue
		}
		l, err := Campaign(ctx, s, e.prefix, e.value)
		if err == nil {
			e.o.logger.Info("elected", "election", e.prefix, "token", l.Token())
			e.term(ctx, l, lead)
			e.o.logger.Info("term ended", "election", e.prefix, "token", l.Token(), "reason", l.Err())
		} else if ctx.Err() == nil {
			e.o.logger.Warn("campaign failed, retrying with a new session", "election", e.prefix, "err", err)
		}
		// Closing revokes the lease: if Resign could not delete the key, the
		// revoke does, and the next candidate need not wait for the TTL.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.o.callTimeout)
		_ = s.Close(cctx)
		cancel()
		if err == nil {
			bo.reset()
		}
		if ctx.Err() == nil {
			sleep(ctx, bo.next())
		}
	}
	return ctx.Err()
}

func (e *Elector) term(ctx context.Context, l *Leadership, lead func(context.Context, *Leadership)) {
	tctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.Ctx(), cancel)
	lead(tctx, l)
	stop()
	cancel()
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.o.callTimeout)
	defer rcancel()
	if err := l.Resign(rctx); err != nil {
		e.o.logger.Warn("resign failed; the lease revoke will release the key", "election", e.prefix, "err", err)
	}
}

package lease

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults for the options below; Config uses the same values.
const (
	// DefaultSessionTTL is short enough that a standby takes over within
	// seconds of a leader dying, and long enough for a LAN hiccup. Across a
	// WAN (a global etcd in another region) use 10s or more.
	DefaultSessionTTL = 5 * time.Second
	// DefaultCallTimeout bounds every single etcd request this package
	// makes. Requests and watches also require the member to have a raft
	// leader, so a member cut off in a minority fails fast instead of
	// answering stale.
	DefaultCallTimeout = 5 * time.Second
	// DefaultSyncInterval is how often a View asks etcd to confirm that its
	// watch is current.
	DefaultSyncInterval = 5 * time.Second
)

// An Option configures a Session, Manager, Elector or View. Options that do
// not apply to a type are ignored by it.
type Option func(*options)

type options struct {
	ttl          time.Duration
	callTimeout  time.Duration
	syncInterval time.Duration
	logger       *slog.Logger
}

func newOptions(opts []Option) options {
	o := options{
		ttl:          DefaultSessionTTL,
		callTimeout:  DefaultCallTimeout,
		syncInterval: DefaultSyncInterval,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	o.logger = o.logger.With("component", "lease")
	return o
}

// WithTTL sets the session TTL. etcd counts whole seconds, so d is rounded
// up, and the server may raise it to its minimum (1.5 election timeouts).
// Values ≤ 0 keep DefaultSessionTTL.
func WithTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ttl = d
		}
	}
}

// WithCallTimeout sets the deadline of each etcd request. Values ≤ 0 keep
// DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.callTimeout = d
		}
	}
}

// WithSyncInterval sets how often a View confirms its watch with the server;
// the view reports itself unhealthy after three intervals without news.
// Values ≤ 0 keep DefaultSyncInterval.
func WithSyncInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.syncInterval = d
		}
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// call returns the context for one etcd request: bounded by the call
// timeout, and failing fast on a member that has lost its raft leader (such
// a member would otherwise answer from a minority partition or hang).
func (o options) call(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, o.callTimeout)
	return clientv3.WithRequireLeader(ctx), cancel
}

// backoff is a capped exponential delay with jitter, for retry loops.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max, cur: min}
}

// next returns a delay in [cur/2, cur) and doubles cur up to max.
func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.cur = b.min }

// sleep waits for d or until ctx ends; it reports whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

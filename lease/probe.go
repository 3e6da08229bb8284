package lease

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A Probe answers "can this etcd be reached right now?" without waiting: one
// goroutine reads a key every interval with a leader-required, linearizable
// Get bounded by timeout, and Healthy reports whether the last read succeeded
// and is recent. So a readiness check and a gauge that both ask the probe
// agree, and an outage shows within interval + timeout of its start (the
// view's watch, by contrast, notices only after three sync intervals).
type Probe struct {
	c        *clientv3.Client
	key      string
	interval time.Duration
	timeout  time.Duration
	stop     context.CancelFunc
	exited   chan struct{}

	mu      sync.Mutex
	ok      bool
	at      time.Time // when ok was last observed
	lastErr error
}

// NewProbe starts probing key on c; interval ≤ 0 means 500 ms and timeout
// ≤ 0 means 1 s. The first answer arrives within timeout; until then the
// probe reports unhealthy. Close stops it.
func NewProbe(c *clientv3.Client, key string, interval, timeout time.Duration) *Probe {
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Probe{c: c, key: key, interval: interval, timeout: timeout, stop: cancel, exited: make(chan struct{})}
	go p.run(ctx)
	return p
}

func (p *Probe) run(ctx context.Context) {
	defer close(p.exited)
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		p.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *Probe) once(ctx context.Context) {
	cctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), p.timeout)
	_, err := p.c.Get(cctx, p.key, clientv3.WithCountOnly())
	cancel()
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ok, p.lastErr = err == nil, err
	if err == nil {
		p.at = time.Now()
	}
}

// Healthy is true when the last probe succeeded and no more than
// interval + timeout ago (a probe stuck in a slow call counts as failing).
func (p *Probe) Healthy() bool { return p.Err() == nil }

// Err is nil while Healthy, else why not: the last call's error, or
// ErrProbeStale when the last success is too old, or ErrProbePending before
// the first answer.
func (p *Probe) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.ok && time.Since(p.at) <= p.interval+p.timeout:
		return nil
	case p.lastErr != nil:
		return p.lastErr
	case p.at.IsZero():
		return ErrProbePending
	default:
		return ErrProbeStale
	}
}

// Close stops the probe and waits for its goroutine.
func (p *Probe) Close() {
	p.stop()
	<-p.exited
}

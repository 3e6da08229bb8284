package main

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// redisProbe pings the region's Redis (every shard) every 500 ms with a
// 1 s timeout, for ax_redis_healthy: a region whose Redis is down or
// frozen answers its API 503 (and /readyz 503), but without the gauge no
// metric or alert said so (its leader still led, its figures stayed put).
//
// The API's Redis calls go through it too (redisGate): while it has seen no
// answer for its window they fail at once, so a frozen Redis costs a
// request nothing instead of its client's read timeouts and retries.
type redisProbe struct {
	ping   func(context.Context) error
	lastOK atomic.Int64 // unix nanoseconds of the last answered ping

	mu     sync.Mutex
	timer  *time.Timer            // fires a window after the last answer
	outage atomic.Pointer[outage] // of the current healthy spell
}

// outage ends (cause errRedisOut) when the probe's window passes without an
// answer: the API's calls still waiting on Redis then stop waiting.
type outage struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

const (
	redisProbeEvery   = 500 * time.Millisecond
	redisProbeTimeout = time.Second
	// redisProbeWindow without an answer is an outage.
	redisProbeWindow = 2 * redisProbeTimeout
)

// errRedisOut is the API's Redis call refused or cut short in an outage.
// A net.Error that timed out: the API answers it as any Redis outage (503
// unavailable, Retry-After).
var errRedisOut error = redisOut{}

type redisOut struct{}

func (redisOut) Error() string {
	return "redis: not tried: no answer to the health probe within " + redisProbeWindow.String()
}
func (redisOut) Timeout() bool   { return true }
func (redisOut) Temporary() bool { return true }

// run probes until ctx ends. The client honours the ping's deadline
// (ContextTimeoutEnabled), so a frozen Redis holds it 1 s at most.
func (p *redisProbe) run(ctx context.Context) {
	t := time.NewTicker(redisProbeEvery)
	defer t.Stop()
	defer p.stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
		start := time.Now()
		if err := p.ping(pctx); err == nil && time.Since(start) <= redisProbeTimeout {
			p.answered(time.Now())
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// answered records an answer at now and starts the window again.
func (p *redisProbe) answered(now time.Time) {
	p.lastOK.Store(now.UnixNano())
	p.mu.Lock()
	defer p.mu.Unlock()
	if o := p.outage.Load(); o == nil || o.ctx.Err() != nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		p.outage.Store(&outage{ctx: ctx, cancel: cancel})
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(redisProbeWindow, p.expire)
	} else {
		p.timer.Reset(redisProbeWindow)
	}
}

// expire ends the current healthy spell, unless an answer came meanwhile.
func (p *redisProbe) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o := p.outage.Load(); o != nil && !p.healthy() {
		o.cancel(errRedisOut)
	}
}

func (p *redisProbe) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
}

// healthy: a ping answered within the window.
func (p *redisProbe) healthy() bool {
	last := p.lastOK.Load()
	return last != 0 && time.Since(time.Unix(0, last)) <= redisProbeWindow
}

func (p *redisProbe) gauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ax_redis_healthy",
		Help: "1 while this server's probe of its region's Redis answers (every shard; every 500 ms, 1 s timeout), else 0; the API answers 503 while Redis is out."},
		func() float64 {
			if p.healthy() {
				return 1
			}
			return 0
		})
}

// apiCall marks the context of an API request (forAPI): its Redis calls go
// through the gate. The server's own loops (leader, outbox, probe) are not
// gated: they keep their own timeouts and back-offs.
type apiCall struct{}

// forAPI marks every request's context as an API request's.
func forAPI(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), apiCall{}, true)))
	})
}

// redisGate is the go-redis hook of the server's clients. An API request's
// call fails at once with errRedisOut while the probe sees no answer, and
// one already waiting (for a connection of the pool, or between retries)
// stops when the probe's window passes: with Redis SIGSTOPped each call
// waited out its read timeouts and retries (5-15 s), so requests piled up
// behind it. An attempt already sent ends at the client's read timeout
// (5 s), which only a deadline shortens. Healthy, a call is unchanged.
type redisGate struct{ p *redisProbe }

func (redisGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g redisGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := g.call(ctx, func(ctx context.Context) error { return next(ctx, cmd) })
		if errors.Is(err, errRedisOut) {
			cmd.SetErr(err)
		}
		return err
	}
}

func (g redisGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := g.call(ctx, func(ctx context.Context) error { return next(ctx, cmds) })
		if errors.Is(err, errRedisOut) {
			for _, c := range cmds {
				c.SetErr(err)
			}
		}
		return err
	}
}

func (g redisGate) call(ctx context.Context, next func(context.Context) error) error {
	if ctx.Value(apiCall{}) == nil {
		return next(ctx)
	}
	o := g.p.outage.Load()
	if o == nil || !g.p.healthy() {
		return errRedisOut
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(o.ctx, func() { cancel(errRedisOut) })()
	err := next(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errRedisOut) {
		return errRedisOut
	}
	return err
}

package main

import (
	"context"
	"errors"
	"log/slog"
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
// On one Redis (or a Sentinel-managed one) the API's Redis calls go through
// its health too (redisGate): while it has heard no answer for its window
// they fail at once, so a frozen Redis costs a request nothing instead of
// its client's read timeouts and retries. A Redis Cluster is gated per
// master instead (nodeProbe): one master out must not refuse the shards
// the others serve.
type redisProbe struct {
	ping func(context.Context) error
	health
}

// health is what a probe heard from one Redis server (or, for the gauge,
// from all of a region's): its last answer, and the gate of the API's calls
// to it, open from an answer until a window passes without one.
type health struct {
	// log, when set, gets a WARN line as the gate closes and an INFO line
	// as it opens again (with the region and the node): an outage is told
	// once, not by every request it refuses.
	log    *slog.Logger
	lastOK atomic.Int64 // unix nanoseconds of the last answer

	mu       sync.Mutex
	timer    *time.Timer           // fires a window after the last answer
	open     atomic.Pointer[spell] // the current open spell; its ctx ends as the gate closes
	closedAt time.Time             // of the current closed spell (mu)
	refused  atomic.Int64          // API calls refused since the gate closed
}

// spell ends (cause errRedisOut) when the probe's window passes without an
// answer: the API's calls still waiting on that Redis then stop waiting.
type spell struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

const (
	redisProbeEvery   = 500 * time.Millisecond
	redisProbeTimeout = time.Second
	// redisProbeWindow without an answer is an outage.
	redisProbeWindow = 2 * redisProbeTimeout
)

// errRedisOut is the API's Redis call refused or cut short in an outage
// (errors.Is matches both): errRedisRefused when it was refused before any
// of it was sent, so it did not run (queue.NotSent: the store may submit a
// new task on another shard instead), errRedisOut itself when it was cut
// short and may have run. A net.Error that timed out: the API answers it
// as any Redis outage (503 unavailable, Retry-After).
var (
	errRedisOut     error = redisOut{}
	errRedisRefused error = redisOut{unsent: true}
)

type redisOut struct{ unsent bool }

func (e redisOut) Error() string {
	if e.unsent {
		return "redis: not tried: no answer to the health probe within " + redisProbeWindow.String()
	}
	return "redis: cut short: no answer to the health probe within " + redisProbeWindow.String()
}
func (redisOut) Timeout() bool   { return true }
func (redisOut) Temporary() bool { return true }

// NotSent: the call was refused before any of it was sent (queue.NotSent).
func (e redisOut) NotSent() bool { return e.unsent }

// Is makes errors.Is(err, errRedisOut) true of both.
func (redisOut) Is(target error) bool {
	_, ok := target.(redisOut)
	return ok
}

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

// answered records an answer at now and starts the window again; a closed
// gate opens.
func (h *health) answered(now time.Time) {
	h.lastOK.Store(now.UnixNano())
	h.mu.Lock()
	defer h.mu.Unlock()
	if o := h.open.Load(); o == nil || o.ctx.Err() != nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		h.open.Store(&spell{ctx: ctx, cancel: cancel})
		if o != nil && h.log != nil {
			h.log.Info("redis answers again: API calls to it go through", "closed_for", now.Sub(h.closedAt).Round(time.Millisecond),
				"refused", h.refused.Swap(0))
		}
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(redisProbeWindow, h.expire)
	} else {
		h.timer.Reset(redisProbeWindow)
	}
}

// expire closes the gate, unless an answer came meanwhile.
func (h *health) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if o := h.open.Load(); o != nil && o.ctx.Err() == nil && !h.healthy() {
		o.cancel(errRedisOut)
		h.closedAt = time.Now()
		if h.log != nil {
			h.log.Warn("redis does not answer: API calls to it are refused (503 unavailable) until it does",
				"silent", time.Since(time.Unix(0, h.lastOK.Load())).Round(time.Millisecond))
		}
	}
}

func (h *health) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
}

// healthy: an answer within the window.
func (h *health) healthy() bool {
	last := h.lastOK.Load()
	return last != 0 && time.Since(time.Unix(0, last)) <= redisProbeWindow
}

// current is the open spell an API call runs in, nil while the gate is
// closed.
func (h *health) current() *spell {
	o := h.open.Load()
	if o == nil || o.ctx.Err() != nil || !h.healthy() {
		return nil
	}
	return o
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

// redisGate is the go-redis hook of a client of one Redis server: the
// server's clients on one Redis or Sentinel (the probe's health), or one
// node's client in a Redis Cluster (that node's, nodeProbe.gate). An API
// request's call fails at once with errRedisOut while its gate is closed,
// and one already waiting (for a connection of the pool, or between
// retries) stops when the gate closes: with Redis SIGSTOPped each call
// waited out its read timeouts and retries (5-15 s), so requests piled up
// behind it. An attempt already sent ends at the client's read timeout
// (5 s), which only a deadline shortens. Healthy, a call is unchanged.
type redisGate struct {
	health func() *health // nil: not gated (a node the probe has not asked yet)
}

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
	cl, _ := ctx.Value(clusterCall{}).(*clusterTry)
	h := g.health()
	if h == nil {
		cl.tried()
		return next(ctx)
	}
	o := h.current()
	if o == nil {
		h.refused.Add(1)
		cl.end()
		return errRedisRefused
	}
	cl.tried()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(o.ctx, func() { cancel(errRedisOut) })()
	err := next(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errRedisOut) {
		cl.end()
		return errRedisOut
	}
	return err
}

// clusterCall is the context key of an API request's call through a Redis
// Cluster client (clusterGate): its *clusterTry, seen by the node clients
// it tries.
type clusterCall struct{}

// clusterTry is one API call through the Cluster client.
type clusterTry struct {
	cancel context.CancelCauseFunc
	// sent: a node's client was let send the command (or a part of its
	// way there, as a MOVED's first try): it may have run, so a refusal
	// of a later try is no proof that it did not.
	sent atomic.Bool
}

func (c *clusterTry) tried() {
	if c != nil {
		c.sent.Store(true)
	}
}

// end ends the Cluster client's call a node's gate refused: the client
// would retry a timed-out error on the same node after a back-off (up to
// its MaxRedirects), each try refused again.
func (c *clusterTry) end() {
	if c != nil {
		c.cancel(errRedisOut)
	}
}

// clusterGate is the go-redis hook of a Cluster client: it lets a node's
// gate end the whole command (clusterTry.end), which is then errRedisOut,
// errRedisRefused if no try of it was let through to a node.
type clusterGate struct{}

func (clusterGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g clusterGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := g.call(ctx, func(ctx context.Context) error { return next(ctx, cmd) })
		if errors.Is(err, errRedisOut) {
			cmd.SetErr(err)
		}
		return err
	}
}

// ProcessPipelineHook: a pipeline's commands a node's gate refused are
// not retried (go-redis takes a hook's refusal as an abort), and the other
// nodes' commands must run on.
func (clusterGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (clusterGate) call(ctx context.Context, next func(context.Context) error) error {
	if ctx.Value(apiCall{}) == nil {
		return next(ctx)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	try := &clusterTry{cancel: cancel}
	err := next(context.WithValue(cctx, clusterCall{}, try))
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errRedisOut) {
		if !try.sent.Load() {
			return errRedisRefused // no node was let send it
		}
		return errRedisOut
	}
	return err
}

// nodeProbe asks every master of a Redis Cluster on its own (PING every
// 500 ms, 1 s timeout), for the gate of the API's calls to that node: a
// call is refused only if the master it goes to has been silent for the
// window; the shards of the other masters answer on. Nodes are known by
// address, as the client routes: after a failover the slots move to the
// promoted replica's address, which is not gated (it has not been silent),
// and the old master, no longer a master, is forgotten. The masters are
// listed apart from the pings (a listing asks a random node for its slots,
// perhaps the frozen one), so a silent node delays no other's ping.
type nodeProbe struct {
	cc  *redis.ClusterClient
	log *slog.Logger

	mu    sync.RWMutex
	nodes map[string]*node // by address: the masters of the last listing
}

// node is one master's health and the client that asks it.
type node struct {
	health
	c      *redis.Client
	asking atomic.Bool // a ping out
}

func newNodeProbe(cc *redis.ClusterClient, log *slog.Logger) *nodeProbe {
	return &nodeProbe{cc: cc, log: log, nodes: map[string]*node{}}
}

// gateCluster puts the gates on a Cluster client. Before its first call:
// OnNewNode sees only the nodes made after it.
func (p *nodeProbe) gateCluster(cc *redis.ClusterClient) {
	cc.AddHook(clusterGate{})
	cc.OnNewNode(func(c *redis.Client) {
		addr := c.Options().Addr
		c.AddHook(redisGate{func() *health { return p.gate(addr) }})
	})
}

// gate is the health of the master at addr, nil if it is none the probe
// asks.
func (p *nodeProbe) gate(addr string) *health {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if n := p.nodes[addr]; n != nil {
		return &n.health
	}
	return nil
}

// run lists the masters and pings each until ctx ends.
func (p *nodeProbe) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer p.stop()
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.list(ctx)
	}()
	t := time.NewTicker(redisProbeEvery)
	defer t.Stop()
	for {
		p.mu.RLock()
		for _, n := range p.nodes {
			if !n.asking.CompareAndSwap(false, true) {
				continue // still out: a frozen node holds it its timeout
			}
			wg.Add(1)
			c := n.c
			go func() {
				defer wg.Done()
				defer n.asking.Store(false)
				pctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
				defer cancel()
				start := time.Now()
				if err := c.Ping(pctx).Err(); err == nil && time.Since(start) <= redisProbeTimeout {
					n.answered(time.Now())
				}
			}()
		}
		p.mu.RUnlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// list updates the masters every 500 ms from the client's view (reloaded:
// a failover shows within a listing, as the client's own calls see it).
func (p *nodeProbe) list(ctx context.Context) {
	t := time.NewTicker(redisProbeEvery)
	defer t.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
		var mu sync.Mutex
		masters := map[string]*redis.Client{}
		err := p.cc.ForEachMaster(lctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			masters[c.Options().Addr] = c
			return nil
		})
		cancel()
		if err == nil && len(masters) > 0 {
			p.masters(masters, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// masters makes these the nodes asked: a new one starts open (a promoted
// replica is usable at once), one no longer a master is forgotten.
func (p *nodeProbe) masters(masters map[string]*redis.Client, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, n := range p.nodes {
		if _, ok := masters[addr]; !ok {
			n.stop()
			if n.current() == nil {
				n.log.Info("redis node is no longer a master: its gate is gone", "refused", n.refused.Load())
			}
			delete(p.nodes, addr)
		}
	}
	for addr, c := range masters {
		if n := p.nodes[addr]; n != nil {
			n.c = c
			continue
		}
		n := &node{c: c}
		n.log = p.log.With("node", addr)
		n.answered(now)
		p.nodes[addr] = n
	}
}

func (p *nodeProbe) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.nodes {
		n.stop()
	}
}

package health

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Probe pings a region's Redis (every shard) every 500 ms with a 1 s
// timeout. Its health feeds ax_redis_healthy (Gauge) and, on one Redis or a
// Sentinel-managed one, the gate of the API's calls (Gate): while it has
// heard no answer for its window they fail at once. A Redis Cluster is
// gated per master instead (NodeProbe): one master out must not refuse the
// shards the others serve.
type Probe struct {
	ping func(context.Context) error
	health
}

// NewProbe is a probe that asks ping. log, when not nil, gets a WARN line
// as the gate closes and an INFO line as it opens again; it should name the
// node. The probe is unhealthy until its first answer (Answered or Run).
func NewProbe(ping func(context.Context) error, log *slog.Logger) *Probe {
	p := &Probe{ping: ping}
	p.log = log
	return p
}

// Gate is the hook that gates the API's calls of a client of the probed
// Redis. Add it to every client of that Redis before its first call.
func (p *Probe) Gate() redis.Hook { return redisGate{func() *health { return &p.health }} }

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
	probeEvery   = 500 * time.Millisecond
	probeTimeout = time.Second
	// probeWindow without an answer is an outage.
	probeWindow = 2 * probeTimeout
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
		return "redis: not tried: no answer to the health probe within " + probeWindow.String()
	}
	return "redis: cut short: no answer to the health probe within " + probeWindow.String()
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

// Run probes until ctx ends. The ping must honour its context's deadline
// (go-redis: ContextTimeoutEnabled), so a frozen Redis holds it 1 s at most.
func (p *Probe) Run(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	defer p.stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		start := time.Now()
		if err := p.ping(pctx); err == nil && time.Since(start) <= probeTimeout {
			p.Answered(time.Now())
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Answered records an answer at now and starts the window again; a closed
// gate opens.
func (h *health) Answered(now time.Time) {
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
		h.timer = time.AfterFunc(probeWindow, h.expire)
	} else {
		h.timer.Reset(probeWindow)
	}
}

// expire closes the gate, unless an answer came meanwhile.
func (h *health) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if o := h.open.Load(); o != nil && o.ctx.Err() == nil && !h.Healthy() {
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

// Healthy reports an answer within the window.
func (h *health) Healthy() bool {
	last := h.lastOK.Load()
	return last != 0 && time.Since(time.Unix(0, last)) <= probeWindow
}

// current is the open spell an API call runs in, nil while the gate is
// closed.
func (h *health) current() *spell {
	o := h.open.Load()
	if o == nil || o.ctx.Err() != nil || !h.Healthy() {
		return nil
	}
	return o
}

// Gauge exports the probe's health as ax_redis_healthy, 1 or 0.
func (p *Probe) Gauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ax_redis_healthy",
		Help: "1 while this server's probe of its region's Redis answers (every shard; every 500 ms, 1 s timeout), else 0; the API answers 503 while Redis is out."},
		func() float64 {
			if p.Healthy() {
				return 1
			}
			return 0
		})
}

// apiCall is the context key that Gated sets.
type apiCall struct{}

// Gated marks ctx as an API request's: its Redis calls go through the
// gates. The server's own loops (leader, outbox, probe) are not gated: they
// keep their own timeouts and back-offs.
func Gated(ctx context.Context) context.Context { return context.WithValue(ctx, apiCall{}, true) }

// IsGated reports whether ctx is marked by Gated.
func IsGated(ctx context.Context) bool { return ctx.Value(apiCall{}) != nil }

// redisGate is the go-redis hook of a client of one Redis server: the
// server's clients on one Redis or Sentinel (the probe's health), or one
// node's client in a Redis Cluster (that node's, NodeProbe.gate). An API
// request's call fails at once with errRedisOut while its gate is closed,
// and one already waiting (for a connection of the pool, or between
// retries) stops when the gate closes, so a frozen Redis does not hold
// requests for its client's read timeouts and retries. An attempt already
// sent ends at the client's read timeout (5 s), which only a deadline
// shortens. Healthy, a call is unchanged.
type redisGate struct {
	health func() *health // nil: not gated (a node the probe has not asked yet)
}

var _ redis.Hook = redisGate{}

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

var _ redis.Hook = clusterGate{}

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

// NodeProbe asks every master of a Redis Cluster on its own (PING every
// 500 ms, 1 s timeout), for the gate of the API's calls to that node: a
// call is refused only if the master it goes to has been silent for the
// window; the shards of the other masters answer on. Nodes are known by
// address, as the client routes: after a failover the slots move to the
// promoted replica's address, which is not gated (it has not been silent),
// and the old master, no longer a master, is forgotten. The masters are
// listed apart from the pings (a listing asks a random node for its slots,
// perhaps the frozen one), so a silent node delays no other's ping.
type NodeProbe struct {
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

// NewNodeProbe is the probe of cc's masters; log names the region, each
// node's lines add its address.
func NewNodeProbe(cc *redis.ClusterClient, log *slog.Logger) *NodeProbe {
	return &NodeProbe{cc: cc, log: log, nodes: map[string]*node{}}
}

// GateCluster puts the gates on a Cluster client. Call it before the
// client's first call: OnNewNode sees only the nodes made after it.
func (p *NodeProbe) GateCluster(cc *redis.ClusterClient) {
	cc.AddHook(clusterGate{})
	cc.OnNewNode(func(c *redis.Client) {
		addr := c.Options().Addr
		c.AddHook(redisGate{func() *health { return p.gate(addr) }})
	})
}

// gate is the health of the master at addr, nil if it is none the probe
// asks.
func (p *NodeProbe) gate(addr string) *health {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if n := p.nodes[addr]; n != nil {
		return &n.health
	}
	return nil
}

// Run lists the masters and pings each until ctx ends.
func (p *NodeProbe) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer p.stop()
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.list(ctx)
	}()
	t := time.NewTicker(probeEvery)
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
				pctx, cancel := context.WithTimeout(ctx, probeTimeout)
				defer cancel()
				start := time.Now()
				if err := c.Ping(pctx).Err(); err == nil && time.Since(start) <= probeTimeout {
					n.Answered(time.Now())
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
func (p *NodeProbe) list(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, probeTimeout)
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
func (p *NodeProbe) masters(masters map[string]*redis.Client, now time.Time) {
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
		n.Answered(now)
		p.nodes[addr] = n
	}
}

func (p *NodeProbe) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.nodes {
		n.stop()
	}
}

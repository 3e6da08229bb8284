package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/redisproc"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/redis/go-redis/v9"
)

// With the region's Redis frozen (SIGSTOP: connections accepted, nothing
// answered), an API request's call that was already waiting ends with
// errRedisOut once the probe's window passes (it waited out its read
// timeout and then its retries), a new one is refused with errRedisOut
// without being sent, and a call of the server's own (no API mark) is not
// gated: it ends with its own deadline's error. Once Redis
// answers the probe again, API calls go through. The log tells the outage
// once: a WARN as the gate closes, an INFO as it opens.
func TestRedisGateRefusesAPICallsWhileTheProbeHearsNothing(t *testing.T) {
	rd := testenv.StartRedis(t)
	var rdb redis.UniversalClient = redis.NewClient(&redis.Options{Addr: rd.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	log, recs := newLevelCounter()
	p := NewProbe(func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, log.With("region", "r1", "node", rd.Addr()))
	p.Answered(time.Now())
	rdb.AddHook(p.Gate())
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go p.Run(ctx)
	api := Gated(ctx)
	if err := rdb.Set(api, "k", "v", 0).Err(); err != nil {
		t.Fatalf("an API call with Redis healthy: %v", err)
	}

	rd.Pause()
	t.Cleanup(rd.Resume)
	inFlight := make(chan error, 1)
	go func() { inFlight <- rdb.Get(api, "k").Err() }()
	if err := <-inFlight; !errors.Is(err, errRedisOut) || queue.NotSent(err) {
		t.Fatalf("an API call sent as Redis froze: %v (unsent: %v), want errRedisOut once the probe's window passed, not unsent (it may have run)", err, queue.NotSent(err))
	}
	if p.Healthy() {
		t.Fatal("the probe still reports Redis healthy after an API call was cut short")
	}
	err := rdb.Get(api, "k").Err()
	var ne net.Error
	if !errors.Is(err, errRedisOut) || !errors.As(err, &ne) || !ne.Timeout() || !queue.NotSent(err) {
		t.Fatalf("an API call in the outage: %v (unsent: %v), want errRedisOut (a net.Error that timed out), unsent (queue.NotSent)", err, queue.NotSent(err))
	}
	if !rdb.(*redis.Client).Options().ContextTimeoutEnabled {
		t.Fatal("the client does not bound a call by its context's deadline")
	}
	own, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = rdb.Get(own, "k").Err()
	cancel()
	if errors.Is(err, errRedisOut) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a server call (not an API request's) with a 300ms deadline in the outage: %v, want its deadline", err)
	}

	rd.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Get(api, "k").Val() != "v" {
		if time.Now().After(deadline) {
			t.Fatalf("API calls still refused 10s after Redis resumed: %v", rdb.Get(api, "k").Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The outage in the log: one WARN as the gate closed, one INFO as it
	// opened, not a line per refused call.
	if w, i := recs.count(slog.LevelWarn, "node", rd.Addr()), recs.count(slog.LevelInfo, "node", rd.Addr()); w != 1 || i != 1 {
		t.Errorf("%d WARN and %d INFO records naming the Redis, want 1 and 1: %+v", w, i, recs.list)
	}
}

// levelCounter is a slog handler that keeps every record's level, message
// and attributes (those of With too), for tests to count them.
type levelCounter struct {
	recs  *logRecords
	attrs []slog.Attr
}

type logRecords struct {
	mu   sync.Mutex
	list []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLevelCounter() (*slog.Logger, *logRecords) {
	r := &logRecords{}
	return slog.New(&levelCounter{recs: r}), r
}

func (h *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounter) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.String(); return true })
	h.recs.mu.Lock()
	h.recs.list = append(h.recs.list, rec)
	h.recs.mu.Unlock()
	return nil
}
func (h *levelCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelCounter{recs: h.recs, attrs: append(slices.Clip(h.attrs), as...)}
}
func (h *levelCounter) WithGroup(string) slog.Handler { return h }

// count is the number of records at level whose attribute key is value
// (any, with key "").
func (r *logRecords) count(level slog.Level, key, value string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.list {
		if rec.level == level && (key == "" || rec.attrs[key] == value) {
			n++
		}
	}
	return n
}

// On a real 3-master Redis Cluster with one master frozen (SIGSTOP), the
// gate is per master: API calls to the keys of the other two go on
// succeeding throughout; those to the frozen master's keys are refused
// with errRedisOut once the probe has heard nothing from it for its window
// (a pipeline over both gets both outcomes), each once, not again on the
// Cluster client's retries; a call of the server's own
// is not gated (it ends at its deadline). The outage is logged once: a
// WARN naming the frozen node as its gate closes, an INFO as it opens
// after SIGCONT, nothing for the others. After SIGCONT every key works.
func TestClusterGateRefusesOnlyTheFrozenMastersCalls(t *testing.T) {
	testenv.Slow(t)
	rc := startPartialCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs(), ContextTimeoutEnabled: true})
	defer cc.Close()
	log, recs := newLevelCounter()
	p := NewNodeProbe(cc, log.With("region", "r1"))
	p.GateCluster(cc)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	probed := make(chan struct{})
	go func() { defer close(probed); p.Run(ctx) }()
	defer func() { stop(); <-probed }()
	api := Gated(ctx)

	// A key on each master.
	keyOf := map[string]string{}
	for i := 0; len(keyOf) < 3 && i < 1000; i++ {
		k := fmt.Sprintf("{k%d}", i)
		m, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keyOf[m.Options().Addr]; !ok {
			keyOf[m.Options().Addr] = k
		}
	}
	if len(keyOf) != 3 {
		t.Fatalf("keys on %d masters, want 3", len(keyOf))
	}
	for _, k := range keyOf {
		if err := cc.Set(api, k, "v", 0).Err(); err != nil {
			t.Fatalf("an API call with the cluster healthy: %v", err)
		}
	}
	waitFor(t, 10*time.Second, "the probe to ask every master", func() bool {
		for addr := range keyOf {
			if p.gate(addr) == nil {
				return false
			}
		}
		return true
	})

	victim := rc.Nodes()[0]
	frozen := keyOf[victim.Addr()]
	var others []string
	for addr, k := range keyOf {
		if addr != victim.Addr() {
			others = append(others, k)
		}
	}
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := victim.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	othersWork := func(when string) {
		t.Helper()
		for _, k := range others {
			if v, err := cc.Get(api, k).Result(); err != nil || v != "v" {
				t.Fatalf("%s: an API call to a healthy master's key %s: %q, %v", when, k, v, err)
			}
		}
	}
	othersWork("just after the freeze")
	// The first call to the frozen master waits out its attempt (sent
	// before the gate closed: cut short, it may have run, so it is not
	// unsent); then calls are refused unsent.
	var firstOut error
	waitFor(t, 30*time.Second, "an API call to the frozen master refused", func() bool {
		othersWork("while the frozen master's gate closes")
		err := cc.Get(api, frozen).Err()
		if firstOut == nil && errors.Is(err, errRedisOut) {
			firstOut = err
		}
		return errors.Is(err, errRedisOut)
	})
	if queue.NotSent(firstOut) {
		t.Errorf("the first API call to the frozen master, sent before its gate closed: %v, reported unsent", firstOut)
	}
	// Each refused once: the Cluster client does not retry the refusal
	// on the same node after a back-off (clusterGate ends the call).
	before := p.gate(victim.Addr()).refused.Load()
	for range 20 {
		err := cc.Get(api, frozen).Err()
		var ne net.Error
		if !errors.Is(err, errRedisOut) || !errors.As(err, &ne) || !ne.Timeout() || !queue.NotSent(err) {
			t.Fatalf("an API call to the frozen master: %v (unsent: %v), want errRedisOut (a net.Error that timed out), unsent (queue.NotSent)", err, queue.NotSent(err))
		}
		othersWork("with the frozen master's gate closed")
	}
	if n := p.gate(victim.Addr()).refused.Load() - before; n != 20 {
		t.Errorf("20 API calls to the frozen master were refused %d times, want 20", n)
	}
	pipe := cc.Pipeline()
	gf, gh := pipe.Get(api, frozen), pipe.Get(api, others[0])
	_, _ = pipe.Exec(api)
	if !errors.Is(gf.Err(), errRedisOut) || !queue.NotSent(gf.Err()) || gh.Val() != "v" {
		t.Fatalf("a pipeline over the frozen master and a healthy one: %v / %q, %v; want errRedisOut / \"v\"", gf.Err(), gh.Val(), gh.Err())
	}
	own, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := cc.Get(own, frozen).Err()
	cancel()
	if errors.Is(err, errRedisOut) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a server call (not an API request's) to the frozen master: %v, want its deadline", err)
	}
	if n := recs.count(slog.LevelWarn, "node", victim.Addr()); n != 1 {
		t.Errorf("%d WARN records naming the frozen node, want 1 (its gate closing)", n)
	}
	if n := recs.count(slog.LevelWarn, "", ""); n != 1 {
		t.Errorf("%d WARN records in all, want 1: %+v", n, recs.list)
	}

	resume()
	waitFor(t, 20*time.Second, "API calls to the resumed master", func() bool {
		return cc.Get(api, frozen).Val() == "v"
	})
	othersWork("after SIGCONT")
	if n := recs.count(slog.LevelInfo, "node", victim.Addr()); n != 1 {
		t.Errorf("%d INFO records naming the resumed node, want 1 (its gate opening)", n)
	}
	if n := recs.count(slog.LevelWarn, "", ""); n != 1 {
		t.Errorf("%d WARN records in all after SIGCONT, want 1", n)
	}
	for _, r := range recs.list {
		if r.attrs["region"] != "r1" {
			t.Errorf("a record without the region: %+v", r)
		}
	}
}

// The gates follow the listing of masters: a new master (a promoted
// replica) is open at once, one no longer a master is not gated any more.
func TestNodeGatesFollowTheMasters(t *testing.T) {
	log, _ := newLevelCounter()
	p := NewNodeProbe(nil, log)
	defer p.stop()
	a, b := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	defer a.Close()
	defer b.Close()
	p.masters(map[string]*redis.Client{"127.0.0.1:1": a}, time.Now())
	if h := p.gate("127.0.0.1:1"); h == nil || h.current() == nil {
		t.Fatal("a master just listed is not open")
	}
	if p.gate("127.0.0.1:2") != nil {
		t.Fatal("a node never listed is gated")
	}
	p.masters(map[string]*redis.Client{"127.0.0.1:2": b}, time.Now())
	if h := p.gate("127.0.0.1:2"); h == nil || h.current() == nil {
		t.Fatal("a promoted master is not open at once")
	}
	if p.gate("127.0.0.1:1") != nil {
		t.Fatal("a node no longer a master is still gated")
	}
}

// startPartialCluster starts a Redis Cluster of 3 masters whose nodes
// serve their slots while another is out (cluster-require-full-coverage
// no). By default, once a master without a replica is marked failing
// (cluster-node-timeout, 5 s) every node answers CLUSTERDOWN: Redis's
// choice, which a test of more than a few seconds would run into; with
// replicas a failover follows instead (e2e TestRedisFailoverLosesNoAcceptedTask).
func startPartialCluster(t *testing.T) *redisproc.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := redisproc.StartCluster(ctx, 3, 0, redisproc.WithStopGrace(5*time.Second),
		redisproc.WithConfig("loglevel warning", "cluster-node-timeout 5000", "cluster-require-full-coverage no"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

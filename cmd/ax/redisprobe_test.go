package main

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// With the region's Redis frozen (SIGSTOP: connections accepted, nothing
// answered), an API request's call that was already waiting ends with
// errRedisOut once the probe's window passes (it waited out its read
// timeout and then its retries), a new one is refused with errRedisOut
// without being sent, and a call of the server's own (no API mark) is not
// gated: it ends with its own deadline's error. Once Redis
// answers the probe again, API calls go through.
func TestRedisGateRefusesAPICallsWhileTheProbeHearsNothing(t *testing.T) {
	rd := testenv.StartRedis(t)
	rdb, err := redisClient(config.Redis{Addr: rd.Addr()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	p := &redisProbe{ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}
	p.answered(time.Now())
	rdb.AddHook(redisGate{p})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go p.run(ctx)
	api := context.WithValue(ctx, apiCall{}, true)
	if err := rdb.Set(api, "k", "v", 0).Err(); err != nil {
		t.Fatalf("an API call with Redis healthy: %v", err)
	}

	rd.Pause()
	t.Cleanup(rd.Resume)
	inFlight := make(chan error, 1)
	go func() { inFlight <- rdb.Get(api, "k").Err() }()
	if err := <-inFlight; !errors.Is(err, errRedisOut) {
		t.Fatalf("an API call sent as Redis froze: %v, want errRedisOut once the probe's window passed", err)
	}
	if p.healthy() {
		t.Fatal("the probe still reports Redis healthy after an API call was cut short")
	}
	err = rdb.Get(api, "k").Err()
	var ne net.Error
	if !errors.Is(err, errRedisOut) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("an API call in the outage: %v, want errRedisOut (a net.Error that timed out)", err)
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
}

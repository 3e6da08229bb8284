package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// redisProbe pings the region's Redis (every shard) every 500 ms with a
// 1 s timeout, for ax_redis_healthy: a region whose Redis is down or
// frozen answers its API 503 (and /readyz 503), but without the gauge no
// metric or alert said so (its leader still led, its figures stayed put).
type redisProbe struct {
	ping   func(context.Context) error
	lastOK atomic.Int64 // unix nanoseconds of the last answered ping
}

const (
	redisProbeEvery   = 500 * time.Millisecond
	redisProbeTimeout = time.Second
)

// run probes until ctx ends. A ping is never started while one is still
// out (a frozen Redis holds it past its timeout): the last success ages.
func (p *redisProbe) run(ctx context.Context) {
	t := time.NewTicker(redisProbeEvery)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
		start := time.Now()
		if err := p.ping(pctx); err == nil && time.Since(start) <= redisProbeTimeout {
			p.lastOK.Store(time.Now().UnixNano())
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// healthy: a ping answered within the last two timeouts.
func (p *redisProbe) healthy() bool {
	last := p.lastOK.Load()
	return last != 0 && time.Since(time.Unix(0, last)) <= 2*redisProbeTimeout
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

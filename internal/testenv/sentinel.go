package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions shape a Sentinel-managed Redis.
type SentinelOptions struct {
	// Replicas of the master (default 1) and sentinels watching it
	// (default 3; the quorum is a majority of them).
	Replicas, Sentinels int
	// Password is the data nodes' requirepass (and masterauth);
	// SentinelPassword the sentinels' own requirepass.
	Password, SentinelPassword string
	// DownAfter is how long the master must not answer before the
	// sentinels call it down (default 1s).
	DownAfter time.Duration
	// TLS, when set, puts every node and sentinel on TLS too (RedisOptions.TLS):
	// replicas replicate from the master's TLS port, the sentinels monitor
	// it there and talk to each other over TLS, so what they tell clients
	// (the master's address, each other's) are TLS ports.
	TLS *Certs
}

// SentinelSet is a master, its replicas and the sentinels watching them,
// all real processes, stopped with t.Cleanup.
type SentinelSet struct {
	t         testing.TB
	opts      SentinelOptions
	Master    *Redis
	Replicas  []*Redis
	Sentinels []*Redis
}

// SentinelMaster is the name the sentinels monitor the master under.
const SentinelMaster = "ax"

// StartRedisSentinel starts a master, its replicas and the sentinels and
// waits until the replicas are in sync and every sentinel knows every
// replica and every other sentinel, so that a failover can happen.
func StartRedisSentinel(t testing.TB, o SentinelOptions) *SentinelSet {
	t.Helper()
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Sentinels == 0 {
		o.Sentinels = 3
	}
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	auth := func() []string {
		if o.Password == "" {
			return nil
		}
		return []string{"masterauth " + strconv.Quote(o.Password)}
	}
	s := &SentinelSet{t: t, opts: o}
	s.Master = StartRedis(t, RedisOptions{Password: o.Password, Extra: auth(), TLS: o.TLS})
	masterPort := s.Master.port
	if o.TLS != nil {
		masterPort = s.Master.tlsPort
	}
	for range o.Replicas {
		extra := append(auth(), "replicaof 127.0.0.1 "+strconv.Itoa(masterPort))
		s.Replicas = append(s.Replicas, StartRedis(t, RedisOptions{Password: o.Password, Extra: extra, TLS: o.TLS}))
	}
	quorum := o.Sentinels/2 + 1
	for range o.Sentinels {
		conf := []string{
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", SentinelMaster, masterPort, quorum),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMaster, o.DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s 10000", SentinelMaster),
			fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMaster),
		}
		if o.Password != "" {
			conf = append(conf, fmt.Sprintf("sentinel auth-pass %s %s", SentinelMaster, strconv.Quote(o.Password)))
		}
		if o.SentinelPassword != "" {
			// Sentinels talk to each other with it too.
			conf = append(conf, "sentinel sentinel-pass "+strconv.Quote(o.SentinelPassword))
		}
		s.Sentinels = append(s.Sentinels, StartRedis(t, RedisOptions{Sentinel: true, Password: o.SentinelPassword, Extra: conf, TLS: o.TLS}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.waitFormed(ctx); err != nil {
		t.Fatalf("testenv: sentinel set not formed: %v", err)
	}
	return s
}

func (s *SentinelSet) waitFormed(ctx context.Context) error {
	var last string
	for {
		ok := true
		for _, r := range s.Replicas {
			c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: s.opts.Password, MaxRetries: -1})
			info, err := c.Info(ctx, "replication").Result()
			_ = c.Close()
			if err != nil || !containsLine(info, "master_link_status:up") {
				ok, last = false, fmt.Sprintf("replica %s: %v %s", r.Addr(), err, info)
				break
			}
		}
		for _, sn := range s.Sentinels {
			if !ok {
				break
			}
			m, err := s.sentinelClient(sn).Master(ctx, SentinelMaster).Result()
			if err != nil || m["num-slaves"] != strconv.Itoa(len(s.Replicas)) ||
				m["num-other-sentinels"] != strconv.Itoa(len(s.Sentinels)-1) {
				ok, last = false, fmt.Sprintf("sentinel %s: %v %v", sn.Addr(), err, m)
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func containsLine(info, line string) bool {
	for _, l := range strings.Split(info, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

func (s *SentinelSet) sentinelClient(sn *Redis) *redis.SentinelClient {
	c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), Password: s.opts.SentinelPassword, MaxRetries: -1})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// SentinelAddrs are the sentinels' host:port.
func (s *SentinelSet) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		out[i] = sn.Addr()
	}
	return out
}

// SentinelTLSAddrs are the sentinels' TLS host:port (with SentinelOptions.TLS).
func (s *SentinelSet) SentinelTLSAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		out[i] = sn.TLSAddr()
	}
	return out
}

// MasterAddr asks the first sentinel that answers where the master is.
func (s *SentinelSet) MasterAddr(ctx context.Context) (string, error) {
	var err error
	for _, sn := range s.Sentinels {
		var a []string
		if a, err = s.sentinelClient(sn).GetMasterAddrByName(ctx, SentinelMaster).Result(); err == nil && len(a) == 2 {
			return a[0] + ":" + a[1], nil
		}
	}
	return "", fmt.Errorf("no sentinel named the master: %v", err)
}

// Client is a failover client through the sentinels, closed with t.Cleanup.
func (s *SentinelSet) Client() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.SentinelAddrs(),
		SentinelPassword: s.opts.SentinelPassword, Password: s.opts.Password})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

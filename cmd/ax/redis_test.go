package main

import (
	"crypto/tls"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/internal/testenv"
)

// redisClient puts redis.tls on every mode's connections (the sentinels'
// too) and passes the sentinels' own password. Single mode over TLS runs
// for real in internal/e2e (TestTLSOnEveryHop).
func TestRedisClientTLSInEveryMode(t *testing.T) {
	certs := testenv.NewCerts(t)
	tlsOn := config.RedisTLS{CA: certs.CA, Cert: certs.Client, Key: certs.ClientKey, ServerName: "redis.internal"}
	for _, c := range []struct {
		name string
		cfg  config.Redis
	}{
		{"rediss addr", config.Redis{Addr: "rediss://10.0.0.1:6380"}},
		{"addr with tls", config.Redis{Addr: "10.0.0.1:6380", TLS: tlsOn}},
		{"sentinel", config.Redis{Sentinel: config.Sentinel{MasterName: "m", Addrs: []string{"10.0.0.1:26379"}, Password: "sp"}, TLS: tlsOn}},
		{"cluster", config.Redis{Cluster: config.RedisCluster{Addrs: []string{"10.0.0.1:7000"}}, TLS: tlsOn}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc, err := redisClient(c.cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var tc *tls.Config
			switch x := rc.(type) {
			case *redis.Client: // single and sentinel (a failover client)
				tc = x.Options().TLSConfig
				if c.cfg.Mode() == "addr" && x.Options().Addr != "10.0.0.1:6380" {
					t.Errorf("addr %q, want the host:port of the URL", x.Options().Addr)
				}
			case *redis.ClusterClient:
				tc = x.Options().TLSConfig
			default:
				t.Fatalf("client %T", rc)
			}
			if tc == nil {
				t.Fatal("no TLS")
			}
			if c.cfg.TLS.CA != "" && (tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "redis.internal") {
				t.Errorf("TLS config lacks the CA, the client certificate or the server name: %+v", tc)
			}
			if tc.InsecureSkipVerify {
				t.Error("InsecureSkipVerify on")
			}
		})
	}
	if _, err := redisClient(config.Redis{Addr: "h:1", TLS: config.RedisTLS{CA: certs.Dir + "/none.pem"}}, 0); err == nil {
		t.Error("a missing CA file: no error")
	}
}

package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TLSCluster is a Redis Cluster of masters on TLS (RedisOptions.TLS with
// Cluster: tls-cluster yes, so the cluster bus and the addresses it hands
// clients are TLS ports), formed by `redis-cli --tls --cluster create`.
type TLSCluster struct {
	Nodes []*Redis
}

// StartRedisClusterTLS starts masters (≥ 3) cluster nodes with TLS from
// certs and waits until every node says cluster_state:ok with every slot
// served. A missing redis-server or redis-cli fails the test.
func StartRedisClusterTLS(t testing.TB, certs *Certs, masters int) *TLSCluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("testenv: redis-cli: %v (run `make deps` or `make test`, which install it)", err)
	}
	c := &TLSCluster{}
	for range masters {
		c.Nodes = append(c.Nodes, StartRedis(t, RedisOptions{Cluster: true, TLS: certs,
			Extra: []string{"cluster-node-timeout 5000"}}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"--tls", "--cacert", certs.CA, "--cert", certs.Client, "--key", certs.ClientKey, "--cluster", "create"}
	args = append(append(args, c.TLSAddrs()...), "--cluster-yes", "--cluster-replicas", "0")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --tls --cluster create: %v: %s", err, out)
	}
	want := strconv.Itoa(masters)
	for _, n := range c.Nodes {
		cc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		for {
			info, err := cc.ClusterInfo(ctx).Result()
			if err == nil && containsLine(info, "cluster_state:ok") && containsLine(info, "cluster_known_nodes:"+want) &&
				containsLine(info, "cluster_slots_ok:16384") {
				break
			}
			select {
			case <-ctx.Done():
				_ = cc.Close()
				t.Fatalf("testenv: TLS cluster node %s not ok: %v %s", n.Addr(), err, info)
			case <-time.After(100 * time.Millisecond):
			}
		}
		_ = cc.Close()
	}
	return c
}

// TLSAddrs are the nodes' TLS host:port.
func (c *TLSCluster) TLSAddrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.TLSAddr()
	}
	return out
}

// String names the nodes, for failure messages.
func (c *TLSCluster) String() string { return fmt.Sprint(c.TLSAddrs()) }

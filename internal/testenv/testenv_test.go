package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisRestartKeepsAOFData(t *testing.T) {
	r := StartRedis(t, RedisOptions{AOFAlways: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := r.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Restart(true)
	got, err := c.Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
}

func TestEtcdPutGet(t *testing.T) {
	e := StartEtcd(t)
	c := e.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "/a", "b"); err != nil {
		t.Fatal(err)
	}
	r, err := c.Get(ctx, "/a")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "b" {
		t.Fatalf("get: %v %v", r, err)
	}
	e.Close()
	e.Close()
}

func TestRedisPasswordIsRequired(t *testing.T) {
	r := StartRedis(t, RedisOptions{Password: "s3cret-pass"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Client().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("with the password: %v", err)
	}
	anon := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer anon.Close()
	if err := anon.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("without the password: %v, want NOAUTH", err)
	}
}

func TestRedisClusterServesEverySlot(t *testing.T) {
	Slow(t)
	c := StartRedisCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc := c.Client(t)
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	served, masters := 0, map[string]bool{}
	for _, s := range slots {
		served += s.End - s.Start + 1
		masters[s.Nodes[0].Addr] = true
	}
	if served != 16384 || len(masters) != 3 {
		t.Fatalf("%d slots served by %d masters; want 16384 by 3", served, len(masters))
	}
	for i := range 30 {
		k := "k" + strconv.Itoa(i)
		if err := cc.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
	}
	// A real cluster refuses a multi-key command across slots.
	if err := cc.Do(ctx, "MGET", "{a}x", "{b}x").Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MGET across slots: %v, want CROSSSLOT", err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := cc.DBSize(ctx).Result()
	if err != nil || n != 0 {
		t.Fatalf("after Flush: dbsize %d, %v", n, err)
	}
}

func TestRedisSentinelFailsOver(t *testing.T) {
	Slow(t)
	s := StartRedisSentinel(t, SentinelOptions{Password: "data-pw", SentinelPassword: "sentinel-pw"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Wait(ctx, 1, time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d %v, want 1 replica", n, err)
	}
	s.Master.Kill()
	for {
		a, err := s.MasterAddr(ctx)
		if err == nil && a == s.Replicas[0].Addr() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no failover to %s: %s %v", s.Replicas[0].Addr(), a, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got, err := c.Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("after the failover: %q %v", got, err)
	}
}

package testenv

import (
	"context"
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

// Command customhandler is a worker with a handler of its own, built on the
// worker SDK: it serves one pool of one region and runs tasks of type
// "greet" (payload {"name": "ada"}, result "hello, ada").
//
// The worker publishes the task types it serves with its heartbeat, so
// placement sends "greet" only to pools where a worker like this one runs,
// and the other workers of its pool never claim it. Against `ax dev`:
//
//	go run ./cmd/ax dev --no-demo-workers     # terminal 1; prints each region's Redis
//	go run ./examples/customhandler --redis 127.0.0.1:6391 --region us-east-1 --pool cpu-spot
//	go run ./cmd/ax submit --type greet --payload '{"name":"ada"}'
//	go run ./cmd/ax get <id>                   # SUCCESS, result "hello, ada"
//
// Against a real region, give its Redis address, the region's name, one of
// its pools, and the Redis password in AX_REDIS_PASSWORD (never the cluster
// token: a worker needs none). --shards must match the region's
// redis.shards.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/worker"
)

func main() {
	addr := flag.String("redis", "127.0.0.1:6391", "the region's Redis address (ax dev prints it)")
	region := flag.String("region", "us-east-1", "the region's name")
	pool := flag.String("pool", "cpu-spot", "the pool to serve")
	shards := flag.Int("shards", 1, "the region's redis.shards")
	id := flag.String("id", "", "worker id (default host-pid)")
	slots := flag.Int("concurrency", 4, "tasks run at once")
	typ := flag.String("type", "greet", "the task type this worker serves")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, *region, *pool, *shards, *id, *slots, *typ, log); err != nil {
		log.Error("customhandler", "err", err)
		os.Exit(1)
	}
}

func run(addr, region, pool string, shards int, id string, slots int, typ string, log *slog.Logger) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: os.Getenv("AX_REDIS_PASSWORD")})
	defer rdb.Close()
	store, err := queue.New(rdb, queue.Options{Region: region, Shards: shards})
	if err != nil {
		return err
	}
	w, err := worker.New(store, worker.Options{Pool: pool, ID: id, Concurrency: slots, Logger: log})
	if err != nil {
		return err
	}
	w.Handle(typ, greet)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("customhandler serving", "region", region, "pool", pool, "type", typ, "worker", w.Options().ID)
	return w.Run(ctx)
}

// greet answers {"name": N} with "hello, N". A payload without a name is a
// caller's mistake: retrying cannot fix it.
func greet(_ context.Context, t *worker.Task) error {
	var p struct {
		Name string `json:"name"`
	}
	if err := t.Decode(&p); err != nil {
		return err // malformed payload: NonRetryable already
	}
	if strings.TrimSpace(p.Name) == "" {
		return worker.NonRetryable(errors.New("greet: payload needs a name"))
	}
	t.SetResult(fmt.Sprintf("hello, %s", p.Name))
	return nil
}

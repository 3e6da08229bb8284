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
	"github.com/ax-sched/ax/queue/store"
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
	store, err := store.New(rdb, queue.Options{Region: region, Shards: shards})
	if err != nil {
		return err
	}
	w, err := worker.New(store.Claimer(), worker.Options{Pool: pool, ID: id, Concurrency: slots, Logger: log})
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

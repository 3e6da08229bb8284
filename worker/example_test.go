package worker_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
)

// A program that serves the pool "cpu" of region eu-west with its own
// handler and two built-in ones, until SIGINT or SIGTERM.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := store.New(rdb, queue.Options{Region: "eu-west"})
	if err != nil {
		log.Fatal(err)
	}
	w, err := worker.New(store.Claimer(), worker.Options{
		Pool:             "cpu",
		Concurrency:      16,
		ShutdownGrace:    30 * time.Second,
		PricePerSlotHour: 0.048,
	})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("report.generate", func(ctx context.Context, t *worker.Task) error {
		var p struct {
			Month string `json:"month"`
		}
		if err := t.Decode(&p); err != nil {
			return err // malformed payload: NonRetryable already
		}
		if p.Month == "" {
			return worker.NonRetryable(fmt.Errorf("report.generate: month is required"))
		}
		// ... build the report, honouring ctx ...
		t.SetResult("s3://reports/" + p.Month + ".pdf")
		return nil
	})
	w.Handle("noop", handlers.Noop)
	w.Handle("sleep", handlers.Sleep)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

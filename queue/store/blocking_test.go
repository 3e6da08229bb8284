package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// A long-poll (Events with a wait) on Options.Blocking leaves the main
// client's connections to submits: with a main pool of one connection, a
// submit succeeds while the long-poll waits; without Blocking the same
// submit cannot get a connection.
func TestBlockingClientKeepsSubmitsFree(t *testing.T) {
	r := testenv.StartRedis(t)
	run := func(separate bool) error {
		main := redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 1, PoolTimeout: 300 * time.Millisecond, MaxRetries: -1})
		defer main.Close()
		opts := queue.Options{Region: "eu-west"}
		var blocking *redis.Client
		if separate {
			blocking = redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 1, MaxRetries: -1})
			defer blocking.Close()
			opts.Blocking = blocking
		}
		s, err := newStages(main, opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _, _ = s.Events(ctx, nil, 10, 3*time.Second)
		}()
		held := main
		if separate {
			held = blocking
		}
		// Events resolves the cursors on the main client first, then
		// blocks on held: wait until its one connection is taken.
		deadline := time.Now().Add(5 * time.Second)
		for st := held.PoolStats(); st.TotalConns != 1 || st.IdleConns != 0; st = held.PoolStats() {
			if time.Now().After(deadline) {
				t.Fatalf("the long-poll never held a connection: %+v", st)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // the XREAD sent, not just the cursor read
		sp := &task.Spec{Type: "noop"}
		if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
			t.Fatal(err)
		}
		res, err := s.Submit(ctx, queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		cancel()
		<-done
		return err
	}
	// (The long-poll then returns with the submit's own event.)
	if err := run(true); err != nil {
		t.Fatalf("with a blocking client: submit %v, want it to succeed during the long-poll", err)
	}
	if err := run(false); err == nil {
		t.Fatal("without a blocking client a submit got the long-poll's only connection: the test shows nothing")
	}
}

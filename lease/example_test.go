package lease_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/ax-sched/ax/lease"
)

// errFenced stands for the store's "a higher token was seen" error.
var errFenced = errors.New("fenced")

// A region cell: the servers of a region campaign in the regional etcd; the
// leader runs its loops with the term's fencing token and steps down as
// soon as a fenced write is rejected.
func ExampleElector() {
	ctx := context.Background()
	regional := lease.Config{Endpoints: []string{"http://127.0.0.1:2379"}}
	cli, err := regional.Dial(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	el := lease.NewElector(cli, regional.Key("elect/region/eu-west"), "server-1:8080", regional.Options()...)
	_ = el.Run(ctx, func(ctx context.Context, l *lease.Leadership) {
		for ctx.Err() == nil {
			if err := promoteDueTasks(ctx, l.Token()); errors.Is(err, errFenced) {
				l.Lost(err) // cancels ctx; Run resigns and campaigns again
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

func promoteDueTasks(context.Context, int64) error { return nil }

// Every server keeps the global view; placement reads only the snapshot.
func ExampleView() {
	ctx := context.Background()
	global := lease.Config{}.Or(lease.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	cli, err := global.Dial(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	v := lease.NewView(cli, global.Key("regions/"))
	defer v.Close()
	<-v.Ready()
	for {
		changed := v.Changes()
		for key, value := range v.Snapshot().All() {
			log.Printf("%s = %s (fresh: %v)", key, value, v.Healthy())
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

package region

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
)

// The leader moves cold delayed tasks (queue/cold.go) to the hot tier ahead
// of their time, and its promote loop makes them READY when due. The
// store's script clock runs ahead of the wall clock by skew, so the test
// need not wait minutes.
func TestLeaderPromotesColdTasks(t *testing.T) {
	var skew atomic.Int64
	r := testenv.StartRedis(t)
	s, err := store.New(r.Client(), queue.Options{Region: "eu-west", ColdHorizon: time.Minute,
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, etcd: testenv.StartEtcd(t), redis: r, store: s}
	id := h.submitDelayed(10 * time.Minute)
	cold := func() int {
		n, err := s.Tasks().ColdWaiting(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if cold() != 1 {
		t.Fatal("a task due in 10 minutes is not in the cold tier (horizon 1m)")
	}
	// 9m45s later the task's bucket starts within half a horizon.
	skew.Store(int64(9*time.Minute + 45*time.Second))
	c, _ := h.startCell("a", nil)
	waitFor(t, 10*time.Second, "a leader", c.Leading)
	waitFor(t, 5*time.Second, "the cold task moved to the hot tier", func() bool { return cold() == 0 })
	if st := h.state(id); st != task.Pending {
		t.Fatalf("moved ahead of its time: %s, want PENDING", st)
	}
	skew.Store(int64(10*time.Minute + time.Second))
	waitFor(t, 5*time.Second, "the task READY once due", func() bool { return h.state(id) == task.Ready })
}

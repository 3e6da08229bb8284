package region

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
)

// With the global etcd gone, the cell keeps leading and scheduling its own
// work, and reports the global etcd as unreachable.
func TestGlobalEtcdLossKeepsRegionScheduling(t *testing.T) {
	testenv.Slow(t)
	h := newHarness(t)
	global := testenv.StartEtcd(t)
	m := NewMetrics(nil)
	c := New(h.store, h.etcd.Client(), global.Client(), Config{
		Region: "eu-west", ID: "a", API: "http://a", SessionTTL: 2 * time.Second,
		Heartbeat: 500 * time.Millisecond, PublishInterval: 300 * time.Millisecond,
		Pools: []Pool{{Name: "cpu", QueueCapacity: 100, PricePerSlotHour: 0.05}},
	}, m)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx, waitPlacer{}) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitFor(t, 10*time.Second, "leader", c.Leading)
	waitFor(t, 5*time.Second, "published to the global etcd", func() bool {
		r, err := global.Client().Get(context.Background(), "/ax/regions/eu-west")
		return err == nil && len(r.Kvs) == 1
	})
	if !c.GlobalHealthy() {
		t.Fatal("global etcd reported unhealthy while it runs")
	}
	global.Close() // the global etcd is gone for good
	waitFor(t, 15*time.Second, "global etcd reported unreachable", func() bool { return !c.GlobalHealthy() })
	id := h.submitDelayed(200 * time.Millisecond)
	waitFor(t, 5*time.Second, "promotion without the global etcd", func() bool { return h.state(id) == task.Ready })
	if !c.Leading() {
		t.Fatal("the cell stopped leading because the global etcd went away")
	}
}

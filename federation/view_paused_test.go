package federation_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/region"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A pool the region leader publishes as paused (backpressure's hysteresis:
// from the pause threshold until the fill is under the resume one, whatever
// the fill in between) admits no priority 3–4 task: the view carries the
// flag into placement, which sends such a task to another pool, or reports
// every candidate saturated (429 at the API).
func TestViewCarriesPausedIntoPlacement(t *testing.T) {
	e := testenv.StartEtcd(t)
	c := e.Client()
	v := view.New(c, "/ax/", placement.DefaultConfig(), time.Millisecond, nil)
	t.Cleanup(v.Close)
	publish := func(paused ...bool) {
		t.Helper()
		f := region.Figures{Region: "r1", API: "http://r1", Leader: "x", UpdatedAt: time.Now()}
		for i, name := range []string{"cheap", "dear"} {
			f.Pools = append(f.Pools, region.PoolFigures{Name: name, Tags: map[string]string{"class": "cpu"},
				Slots: 10, Running: 10, Ready: 500, QueueCapacity: 1000, PricePerSlotHour: 0.01 * float64(i+1),
				Paused: paused[i]})
		}
		putFigures(t, c, f)
	}
	p, err := placement.NewPlacer(placement.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	low := placement.Task{Type: "etl", Tags: map[string]string{"class": "cpu"}, Priority: 4}
	high := low
	high.Priority = 1
	place := func(tk placement.Task) placement.Decision {
		v.Refresh()
		return p.Place(v.Pools(), tk, time.Now())
	}
	publish(true, false)
	fedtest.Eventually(t, 10*time.Second, "low priority placed in the pool that is not paused", func() bool {
		d := place(low)
		return d.OK && d.Pool == "dear"
	})
	if d := place(high); !d.OK || d.Pool != "cheap" {
		t.Fatalf("priority 1: %+v, want the cheap pool despite its pause", d)
	}
	publish(true, true)
	fedtest.Eventually(t, 10*time.Second, "low priority refused as saturated", func() bool {
		d := place(low)
		return !d.OK && d.AllSaturated()
	})
}

// A pool whose capacity window is open but which has no live worker is not
// a place for tasks (NO_SLOTS): the window lends what workers have. ax dev
// met it every evening (its europe-west4 GPU pool lends 7 slots from 20:00
// Amsterdam time) with --no-demo-workers. With workers alive it lends at
// most their slots.
func TestOpenWindowWithoutWorkersTakesNothing(t *testing.T) {
	e := testenv.StartEtcd(t)
	c := e.Client()
	v := view.New(c, "/ax/", placement.DefaultConfig(), time.Millisecond, nil)
	t.Cleanup(v.Close)
	always := &region.Schedule{Timezone: "UTC", Windows: []region.ScheduleWindow{{Start: "00:00", End: "12:00", Slots: 7}, {Start: "12:00", End: "00:00", Slots: 7}}}
	publish := func(workers int, slots ...int) {
		t.Helper()
		pf := region.PoolFigures{Name: "lend", Tags: map[string]string{"class": "cpu"}, Slots: 8 * min(workers, 1),
			Workers: workers, QueueCapacity: 1000, PricePerSlotHour: 0.01, Schedule: always}
		if len(slots) > 0 { // every slot busy, so the wait is read off the slots
			pf.Slots, pf.Running = slots[0], slots[0]
		}
		putFigures(t, c, region.Figures{Region: "r1", API: "http://r1", Leader: "x", UpdatedAt: time.Now(), Pools: []region.PoolFigures{pf}})
	}
	p, err := placement.NewPlacer(placement.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tk := placement.Task{Type: "etl", Tags: map[string]string{"class": "cpu"}, Priority: 2}
	explain := func() placement.Explanation {
		v.Refresh()
		return p.Explain(v.Pools(), tk, time.Now())
	}
	publish(0)
	fedtest.Eventually(t, 10*time.Second, "the pool without workers refused as NO_SLOTS", func() bool {
		x := explain()
		return len(x.Candidates) == 1 && !x.Decision.OK && x.Candidates[0].Reason == placement.ReasonNoSlots
	})
	publish(1)
	fedtest.Eventually(t, 10*time.Second, "placed once a worker lives", func() bool {
		x := explain()
		return x.Decision.OK && x.Decision.Pool == "lend"
	})
	// Workers alive with 3 slots: the open window lends 3, not its 7 (the
	// expected wait runs at 3 slots ÷ the 1 s default duration).
	publish(1, 3)
	fedtest.Eventually(t, 10*time.Second, "the window capped by the live workers' slots", func() bool {
		x := explain()
		c := x.Candidates[0]
		return x.Decision.OK && c.WaitSource == placement.WaitSlots && c.DrainRate == 3
	})
}

// putFigures writes a region's figures where its leader would.
func putFigures(t *testing.T, c *clientv3.Client, f region.Figures) {
	t.Helper()
	b, _ := json.Marshal(f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "/ax/regions/"+f.Region, string(b)); err != nil {
		t.Fatal(err)
	}
}

package view_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ax-sched/ax/federation/view"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/region"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func figures(name string, at time.Time) region.Figures {
	return region.Figures{Region: name, API: "http://" + name, Leader: "x", UpdatedAt: at,
		Pools: []region.PoolFigures{{Name: "cpu", Tags: map[string]string{"class": "cpu"}, Slots: 4, Workers: 1,
			QueueCapacity: 100, PricePerSlotHour: 0.01}}}
}

func put(t *testing.T, c *clientv3.Client, f region.Figures) {
	t.Helper()
	b, _ := json.Marshal(f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "/ax/regions/"+f.Region, string(b)); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A region's own figures are local truth in its own view: when its
// registration in the global etcd goes stale (the global etcd is cut off)
// or disappears (its session expired), its servers still place tasks
// pinned to it there, never refusing them as REGION_EXCLUDED; another
// region's lapsed registration still takes it out of placement.
func TestHomeRegionStaysPlaceableWithoutItsRegistration(t *testing.T) {
	e := testenv.StartEtcd(t)
	c := e.Client()
	pcfg := placement.DefaultConfig()
	pcfg.StaleAfter = time.Second
	pl, err := placement.NewPlacer(pcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := view.New(c, "/ax/", pcfg, time.Millisecond, nil)
	t.Cleanup(v.Close)
	v.Home("home", nil)
	published := time.Now().Truncate(time.Millisecond)
	put(t, c, figures("home", published))
	put(t, c, figures("away", time.Now()))
	pinned := placement.Task{Type: "etl", Tags: map[string]string{"class": "cpu"}, Regions: []string{"home"}, Home: "home"}
	away := pinned
	away.Regions = []string{"away"}
	place := func(tk placement.Task) placement.Decision {
		v.Refresh()
		return pl.Place(v.Pools(), tk, time.Now())
	}
	eventually(t, "both regions placeable", func() bool { return place(pinned).OK && place(away).OK })

	// Stale: nobody publishes for longer than stale_after.
	time.Sleep(1500 * time.Millisecond)
	if d := place(pinned); !d.OK || d.Region != "home" {
		t.Fatalf("home with stale registration: %+v (%v), want placed at home", d, d.Err())
	}
	if d := place(away); d.OK {
		t.Fatalf("away with stale registration placed: %+v", d)
	}
	if r, ok := v.Region("home"); !ok || !r.Healthy || r.Stale {
		t.Fatalf("home region: %+v, want healthy and fresh in its own view", r)
	}
	// The staleness rule exempts the home region; its figures keep the time
	// they were published (the placer's damping counts from it).
	if r, _ := v.Region("home"); !r.UpdatedAt.Equal(published) {
		t.Fatalf("home figures published at %v shown as of %v", published, r.UpdatedAt)
	}

	// Lapsed: the registration is gone (session expired).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Delete(ctx, "/ax/regions/home"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "home still placeable without its registration", func() bool {
		d := place(pinned)
		if d.Unplaceable() {
			t.Fatalf("home without registration: unplaceable %+v", d)
		}
		return d.OK && d.Region == "home"
	})
	v.Suspect("home", time.Now())
	if d := place(pinned); !d.OK {
		t.Fatalf("home suspected by itself: %+v", d)
	}

	// The leader's own figures win over older ones from the global etcd.
	local := figures("home", time.Now())
	local.Pools[0].Paused = true
	v.Home("home", func() region.Figures { return local })
	if r, _ := v.Region("home"); !r.Pools[0].Paused {
		t.Fatalf("home region: %+v, want the leader's figures", r)
	}
}

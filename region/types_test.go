package region

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
)

// The leader publishes, per pool, the task types its live workers serve:
// the union while every live worker names its types; null (any type) once
// one does not say, and always for a pool that scales from zero.
func TestPublishesServedTypes(t *testing.T) {
	h := newHarness(t)
	a, _ := h.startCell("a", nil, func(c *Config) {
		c.Pools = append(c.Pools, Pool{Name: "burst", QueueCapacity: 100, PricePerSlotHour: 0.05, ScaleFromZero: true})
	})
	waitFor(t, 10*time.Second, "a leads", a.Leading)
	ctx := context.Background()
	beat := func(w, pool string, ts queue.Types) {
		t.Helper()
		if _, err := h.store.Claimer().Heartbeat(ctx, w, pool, 2, ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	serve := func(types ...string) queue.Types {
		ts, err := queue.ServeTypes(types...)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	published := func() map[string]json.RawMessage {
		r, err := h.etcd.Client().Get(ctx, "/ax/regions/eu-west")
		if err != nil || len(r.Kvs) == 0 {
			return nil
		}
		var f struct {
			Pools []struct {
				Name  string          `json:"name"`
				Types json.RawMessage `json:"types"`
			} `json:"pools"`
		}
		_ = json.Unmarshal(r.Kvs[0].Value, &f)
		out := map[string]json.RawMessage{}
		for _, p := range f.Pools {
			out[p.Name] = p.Types
		}
		return out
	}
	beat("w1", "cpu", serve("b", "a"))
	beat("w2", "cpu", serve("c"))
	beat("w3", "burst", serve("a"))
	waitFor(t, 5*time.Second, "cpu serves a, b and c; burst any type", func() bool {
		p := published()
		return string(p["cpu"]) == `["a","b","c"]` && string(p["burst"]) == "null"
	})
	if got := a.Figures().Pools; !slices.Equal(got[1].Types, []string{"a", "b", "c"}) || got[0].Types != nil {
		t.Fatalf("the leader's own figures: %+v", got)
	}
	beat("w4", "cpu", queue.Types{})
	waitFor(t, 5*time.Second, "cpu serves any type once a worker does not say", func() bool {
		return string(published()["cpu"]) == "null"
	})
}

func TestMovedOnServedTypes(t *testing.T) {
	base := []PoolFigures{{Name: "cpu", Slots: 4, Types: []string{"a"}}}
	for _, c := range []struct {
		name  string
		types []string
		want  bool
	}{
		{"same", []string{"a"}, false},
		{"another type", []string{"a", "b"}, true},
		{"any type", nil, true},
		{"none", []string{}, true},
	} {
		next := []PoolFigures{{Name: "cpu", Slots: 4, Types: c.types}}
		if got := moved(base, next); got != c.want {
			t.Errorf("%s: moved %v, want %v", c.name, got, c.want)
		}
	}
}

package store_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

func serve(t *testing.T, types ...string) queue.Types {
	t.Helper()
	ts, err := queue.ServeTypes(types...)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestServeTypes(t *testing.T) {
	many := make([]string, queue.MaxWorkerTypes+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	for _, c := range []struct {
		name    string
		in      []string
		wantErr string
		list    []string
		serves  map[string]bool
	}{
		{name: "sorted and folded", in: []string{"b", "a", "b"}, list: []string{"a", "b"},
			serves: map[string]bool{"a": true, "b": true, "c": false, "": false, "a,b": false}},
		{name: "prefix is not a match", in: []string{"report.generate"}, list: []string{"report.generate"},
			serves: map[string]bool{"report": false, "generate": false, "report.generate": true}},
		{name: "none", in: nil, list: []string{}, serves: map[string]bool{"a": false}},
		{name: "at the cap", in: many[:queue.MaxWorkerTypes], list: nil},
		{name: "over the cap", in: many, wantErr: "at most 64"},
		{name: "comma", in: []string{"a,b"}, wantErr: "letters, digits"},
		{name: "empty", in: []string{""}, wantErr: "required"},
		{name: "star", in: []string{"*"}, wantErr: "letters, digits"},
		{name: "too long", in: []string{strings.Repeat("x", task.MaxTypeLen+1)}, wantErr: "longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := queue.ServeTypes(c.in...)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Known() || got.All() {
				t.Fatalf("%v: Known %v All %v", got, got.Known(), got.All())
			}
			if c.list != nil {
				if d := cmp.Diff(c.list, got.List()); d != "" {
					t.Fatalf("List (-want +got):\n%s", d)
				}
			}
			for ty, want := range c.serves {
				if got.Serves(ty) != want {
					t.Errorf("Serves(%q) = %v, want %v", ty, !want, want)
				}
			}
		})
	}
	for _, all := range []queue.Types{{}, queue.AnyType} {
		if !all.All() || !all.Serves("anything") || all.List() != nil || all.String() != "*" {
			t.Errorf("%#v: every type expected", all)
		}
	}
	if (queue.Types{}).Known() || !queue.AnyType.Known() {
		t.Error("only the zero value is unsaid")
	}
}

// A claim takes only the types its claimer serves, in the order a claim
// without a filter would take them; the rest keep their place and order,
// and are left to the next claimer with a wake-up.
func TestClaimTakesOnlyServedTypes(t *testing.T) {
	types := []string{"t.a", "t.b", "t.b"}
	// The same tasks (types, priorities, enqueue times) in two stores: one
	// to learn the order an unfiltered claim takes them in.
	fill := func(e *env) []string {
		var ids []string
		for i := 0; i < 12; i++ {
			ids = append(ids, e.submit("cpu", typ(types[i%3]), prio(1+i%3)))
			e.clock.Advance(time.Millisecond)
		}
		return ids
	}
	one := func(o *queue.Options) { o.Shards = 1 } // one ready set per priority, one wake-up list
	ref := newEnv(t, one)
	refIDs := fill(ref)
	rank := map[int]int{} // submit index → claim rank
	for r, g := range ref.claim("cpu", len(refIDs)) {
		for i, id := range refIDs {
			if id == g.ID {
				rank[i] = r
			}
		}
	}
	e := newEnv(t, one)
	all := fill(e)
	order := func(ty string) []string {
		var idx []int
		for i := range all {
			if types[i%3] == ty {
				idx = append(idx, i)
			}
		}
		sort.Slice(idx, func(a, b int) bool { return rank[idx[a]] < rank[idx[b]] })
		var out []string
		for _, i := range idx {
			out = append(out, all[i])
		}
		return out
	}
	as, bs := order("t.a"), order("t.b")
	rdb := e.rdb
	wake := e.s.Prefix(0) + "wake:cpu"
	rdb.Del(e.ctx, wake)

	got, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "wa", N: 10, Types: serve(t, "t.a", "t.x")})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range got {
		if g.Type != "t.a" {
			t.Fatalf("claimed %s of type %s", g.ID, g.Type)
		}
		ids = append(ids, g.ID)
	}
	if d := cmp.Diff(as, ids); d != "" {
		t.Fatalf("served claim order (-want +got):\n%s", d)
	}
	if n, _ := rdb.LLen(e.ctx, wake).Result(); n != 1 {
		t.Fatalf("wake-up markers after passing tasks over: %d, want 1", n)
	}
	c, _ := e.s.Counts(e.ctx)
	if c.ReadyIn("cpu") != len(bs) || c.Running != len(as) {
		t.Fatalf("counts after the served claim: ready %d running %d", c.ReadyIn("cpu"), c.Running)
	}
	for _, id := range bs {
		if st := e.state(id); st != task.Ready {
			t.Fatalf("passed-over task %s is %s", id, st)
		}
	}
	// A claimer that serves nothing takes nothing; one that serves t.b takes
	// the rest in their order.
	if got, _ := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "wn", N: 10, Types: serve(t)}); len(got) != 0 {
		t.Fatalf("a claimer serving no type took %d", len(got))
	}
	got, _ = e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "wb", N: 10, Types: serve(t, "t.b")})
	ids = ids[:0]
	for _, g := range got {
		ids = append(ids, g.ID)
	}
	if d := cmp.Diff(bs, ids); d != "" {
		t.Fatalf("t.b claim order (-want +got):\n%s", d)
	}
	for _, g := range got {
		if g.Attempts != 1 {
			t.Fatalf("%s: attempts %d, want 1 (passing over costs no attempt)", g.ID, g.Attempts)
		}
	}
}

// Per priority, a claim passes over at most claimSkip tasks of other types:
// a served task right behind claimSkip-1 of them is taken, one behind
// claimSkip is not (until they are drained), and another priority is still
// seen.
func TestClaimPassesOverABoundedNumber(t *testing.T) {
	for _, c := range []struct {
		ahead int
		taken bool
	}{{queue.ClaimSkip - 1, true}, {queue.ClaimSkip, false}} {
		t.Run(fmt.Sprint(c.ahead, " ahead"), func(t *testing.T) {
			for _, p := range []int{0, 2} {
				e := newEnv(t, func(o *queue.Options) { o.Shards = 1 }) // the bound is per shard
				for i := 0; i < c.ahead; i++ {
					e.submit("cpu", typ("t.b"), prio(p))
				}
				mine := e.submit("cpu", typ("t.a"), prio(p))
				got, err := e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "wa", N: 4, Types: serve(t, "t.a")})
				if err != nil {
					t.Fatal(err)
				}
				if (len(got) == 1 && got[0].ID == mine) != c.taken || len(got) > 1 {
					t.Fatalf("priority %d, %d ahead: claimed %d (want mine taken: %v)", p, c.ahead, len(got), c.taken)
				}
				// Another priority is still seen.
				other := e.submit("cpu", typ("t.a"), prio(3))
				got, _ = e.s.Claim(e.ctx, queue.ClaimRequest{Pool: "cpu", Worker: "wa", N: 1, Types: serve(t, "t.a")})
				if len(got) != 1 || (got[0].ID != other && got[0].ID != mine) {
					t.Fatalf("priority %d, %d ahead: the next claim took %v", p, c.ahead, got)
				}
			}
		})
	}
}

func TestCleanWorkersReportsServedTypes(t *testing.T) {
	many := func(from int) queue.Types {
		var ts []string
		for i := 0; i < queue.MaxWorkerTypes; i++ {
			ts = append(ts, fmt.Sprintf("t%d", from+i))
		}
		return serve(t, ts...)
	}
	for _, c := range []struct {
		name    string
		workers map[string]queue.Types
		want    []string // nil: any type
	}{
		{"union", map[string]queue.Types{"w1": serve(t, "a", "b"), "w2": serve(t, "b", "c")}, []string{"a", "b", "c"}},
		{"one unsaid", map[string]queue.Types{"w1": serve(t, "a"), "w2": {}}, nil},
		{"one catch-all", map[string]queue.Types{"w1": serve(t, "a"), "w2": queue.AnyType}, nil},
		{"serving none", map[string]queue.Types{"w1": serve(t)}, []string{}},
		{"no workers", nil, nil},
		{"over the pool cap", map[string]queue.Types{"w1": many(0), "w2": many(64), "w3": many(128), "w4": many(192), "w5": many(256)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			for w, ts := range c.workers {
				if _, err := e.s.Heartbeat(e.ctx, w, "cpu", 2, ts, nil); err != nil {
					t.Fatal(err)
				}
			}
			pw, err := e.s.CleanWorkers(e.ctx, leader, "cpu", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if pw.Live != len(c.workers) || pw.Slots != 2*len(c.workers) {
				t.Fatalf("%+v", pw)
			}
			if (pw.Types == nil) != (c.want == nil) {
				t.Fatalf("types %#v, want %#v", pw.Types, c.want)
			}
			if d := cmp.Diff(c.want, pw.Types); c.want != nil && d != "" {
				t.Fatalf("types (-want +got):\n%s", d)
			}
		})
	}
	t.Run("dead workers are forgotten with their types", func(t *testing.T) {
		e := newEnv(t)
		if _, err := e.s.Heartbeat(e.ctx, "old", "cpu", 1, queue.Types{}, nil); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
		if _, err := e.s.Heartbeat(e.ctx, "new", "cpu", 1, serve(t, "a"), nil); err != nil {
			t.Fatal(err)
		}
		pw, err := e.s.CleanWorkers(e.ctx, leader, "cpu", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if pw.Removed != 1 || pw.Live != 1 || !cmp.Equal(pw.Types, []string{"a"}) {
			t.Fatalf("%+v", pw)
		}
		if n, _ := e.rdb.HLen(e.ctx, e.s.Prefix(0)+"types:cpu").Result(); n != 1 {
			t.Fatalf("types hash holds %d workers, want 1", n)
		}
		// A worker that stops saying its types is no longer listed as one
		// serving "a" only.
		if _, err := e.s.Heartbeat(e.ctx, "new", "cpu", 1, queue.Types{}, nil); err != nil {
			t.Fatal(err)
		}
		if pw, _ = e.s.CleanWorkers(e.ctx, leader, "cpu", 10*time.Second); pw.Types != nil {
			t.Fatalf("types %v after the worker stopped saying them, want nil", pw.Types)
		}
	})
}

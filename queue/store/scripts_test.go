package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// calls reports whether a SLOWLOG entry's arguments are a call of sc, by
// FCALL or EVALSHA.
func calls(args []string, sc *queue.Script) bool {
	return len(args) > 1 && (strings.EqualFold(args[0], "fcall") && args[1] == sc.Fn ||
		strings.EqualFold(args[0], "evalsha") && args[1] == sc.Hash())
}

// On Redis 7 the store runs its scripts as one Functions library; one that
// lost the library (FUNCTION FLUSH here; a restart without persistence or a
// failover to a replica that never had it) gets it again on the next call.
// Where Redis has no Functions the EVALSHA forms run the same lifecycle.
func TestScriptsRunAsFunctions(t *testing.T) {
	e := newEnv(t)
	id := e.submit("cpu")
	if !e.s.FunctionsInUse() {
		t.Fatal("the store on Redis 7 does not run its scripts with FCALL")
	}
	var libs int
	eachMaster(t, e, func(c redis.Cmdable) {
		l, err := c.FunctionList(e.ctx, redis.FunctionListQuery{LibraryNamePattern: queue.Library.Name}).Result()
		if err != nil {
			t.Fatal(err)
		}
		libs += len(l)
		if err := c.FunctionFlush(e.ctx).Err(); err != nil {
			t.Fatal(err)
		}
	})
	want := 1
	if e.s.Cluster() != nil {
		want = testenv.SuiteMasters
	}
	if libs != want {
		t.Fatalf("library %s loaded on %d masters", queue.Library.Name, libs)
	}
	tk := e.claimOne("cpu")
	if tk.ID != id {
		t.Fatalf("claimed %+v after FUNCTION FLUSH", tk)
	}
	if errs, err := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: tk.LeaseToken, Result: "ok"}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if got, _ := e.s.Get(e.ctx, id); got.State != task.Success {
		t.Fatalf("after complete: %+v", got)
	}

	// The EVALSHA forms: each compiles, and a lifecycle runs on them.
	entries, _ := queue.ScriptFS.ReadDir("scripts")
	for _, en := range entries {
		if n := strings.TrimSuffix(en.Name(), ".lua"); n != "lib" {
			if err := queue.Load(n).Ev.Load(e.ctx, e.rdb).Err(); err != nil {
				t.Fatalf("%s.lua's EVALSHA form: %v", n, err)
			}
		}
	}
	opts := e.s.Options()
	opts.EvalSHA = true
	ev, err := newStages(e.rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.s = ev
	id = e.submit("cpu")
	tk = e.claimOne("cpu")
	if errs, err := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: tk.LeaseToken, Result: "ok"}); tk.ID != id || err != nil || errs[0] != nil {
		t.Fatal(tk.ID, err, errs)
	}
	if got, _ := e.s.Get(e.ctx, id); got.State != task.Success {
		t.Fatalf("EVALSHA: after complete: %+v", got)
	}
}

// eachMaster runs f on every master of the test's Redis.
func eachMaster(t *testing.T, e *env, f func(redis.Cmdable)) {
	if cc, ok := e.rdb.(*redis.ClusterClient); ok {
		if err := cc.ForEachMaster(e.ctx, func(_ context.Context, n *redis.Client) error { f(n); return nil }); err != nil {
			t.Fatal(err)
		}
		return
	}
	f(e.rdb)
}

// TestOldLibrariesPruned: a store's first load deletes the ax_ libraries
// no store used for longer than fnGrace, registers unknown ones (from
// builds before the registry) as used now, keeps recent ones and its own,
// and its script calls delete nothing, so an old build that loads its
// library again keeps it.
func TestOldLibrariesPruned(t *testing.T) {
	e := newEnv(t)
	fake := func(n string) string {
		return "#!lua name=" + n + "\nredis.register_function('" + n + "_x', function() return 1 end)\n"
	}
	names := []string{"ax_00000000old1", "ax_00000000new1", "ax_0000000unreg"}
	load := func(n string) {
		eachMaster(t, e, func(c redis.Cmdable) {
			if err := c.FunctionLoadReplace(e.ctx, fake(n)).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, n := range names {
		load(n)
	}
	t.Cleanup(func() {
		eachMaster(t, e, func(c redis.Cmdable) {
			for _, n := range names {
				c.FunctionDelete(context.Background(), n)
			}
		})
	})
	now := e.clock.Now().UnixMilli()
	e.rdb.ZAdd(e.ctx, queue.FnRegistry, redis.Z{Score: float64(now - 2*queue.FnGrace.Milliseconds()), Member: names[0]},
		redis.Z{Score: float64(now - queue.FnGrace.Milliseconds()/2), Member: names[1]},
		redis.Z{Score: float64(now - 3*queue.FnGrace.Milliseconds()), Member: queue.Library.Name},
		redis.Z{Score: float64(now - 2*queue.FnGrace.Milliseconds()), Member: "ax_000000000gone"})
	present := func() map[string]int {
		m := map[string]int{}
		eachMaster(t, e, func(c redis.Cmdable) {
			l, err := c.FunctionList(e.ctx, redis.FunctionListQuery{LibraryNamePattern: "ax_*"}).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range l {
				m[x.Name]++
			}
		})
		return m
	}
	masters := 1
	if e.s.Cluster() != nil {
		masters = testenv.SuiteMasters
	}
	e.submit("cpu") // the first call: loads and prunes
	p := present()
	if p[names[0]] != 0 || p[names[1]] != masters || p[names[2]] != masters || p[queue.Library.Name] != masters {
		t.Fatalf("after the first load: %v", p)
	}
	reg := map[string]float64{}
	for _, z := range e.rdb.ZRangeWithScores(e.ctx, queue.FnRegistry, 0, -1).Val() {
		reg[z.Member.(string)] = z.Score
	}
	if _, ok := reg[names[0]]; ok || reg[names[2]] != float64(now) || reg[queue.Library.Name] != float64(now) || len(reg) != 3 {
		t.Fatalf("registry: %v", reg)
	}

	// Later: names[1]'s build keeps using it (its store refreshes the
	// registry), the unregistered one's grace has run out.
	e.clock.Advance(queue.FnGrace + time.Minute)
	e.rdb.ZAdd(e.ctx, queue.FnRegistry, redis.Z{Score: float64(e.clock.Now().UnixMilli()), Member: names[1]})
	gone, err := e.s.PruneFunctions(e.ctx)
	if err != nil || !slices.Equal(gone, []string{names[2]}) {
		t.Fatalf("pruned %v, %v", gone, err)
	}
	// Its build, still running, loads it again: calls delete nothing.
	load(names[2])
	for range 3 {
		e.submit("cpu")
	}
	if p := present(); p[names[2]] != masters || p[names[1]] != masters || p[queue.Library.Name] != masters {
		t.Fatalf("after the old build loaded its library again: %v", p)
	}
}

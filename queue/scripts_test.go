package queue

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Every script keeps the lib.lua declarations it names, directly or
// through another kept one, and no declaration it does not need.
func TestPreludeKeepsWhatScriptsUse(t *testing.T) {
	lib, err := scriptFS.ReadFile("scripts/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	full := prelude(string(lib), "fmt fmt_now clock tkey lkey qkey rfield wkey dkey mark dnkey is_lazy lazy_state remark cnt zadd finish fence wake trail flush event retain backoff retry_or_dead leave_running make_ready")
	if got, want := strings.Count(full, "\\nlocal ")+strings.Count(full[:min(6, len(full))], "local "), strings.Count(string(lib), "\\nlocal "); got < want {
		t.Fatalf("naming every helper kept %d of lib.lua's %d declarations", got, want)
	}
	claim, _ := scriptFS.ReadFile("scripts/claim.lua")
	p := prelude(string(lib), string(claim))
	for _, must := range []string{"local function qkey", "local function memo2", "local function finish",
		"local function cnt", "local function zadd", "local function wake", "local function event", "local C\n", "local CTX",
		"local function begin"} {
		if !strings.Contains(p, must) {
			t.Errorf("claim's prelude lacks %q", must)
		}
	}
	// trail stays: a claim that parks a limited task logs it (lib.lua park).
	for _, not := range []string{"local function retry_or_dead", "local function lazy_state", "local function fence"} {
		if strings.Contains(p, not) {
			t.Errorf("claim's prelude keeps %q, which it does not use", not)
		}
	}
	if len(p) >= len(lib)*3/5 {
		t.Errorf("claim's prelude is %d of lib.lua's %d bytes", len(p), len(lib))
	}
}

// calls reports whether a SLOWLOG entry's arguments are a call of sc, by
// FCALL or EVALSHA.
func calls(args []string, sc *script) bool {
	return len(args) > 1 && (strings.EqualFold(args[0], "fcall") && args[1] == sc.fn ||
		strings.EqualFold(args[0], "evalsha") && args[1] == sc.Hash())
}

// lib.lua's top level is defined once per library load and shared by
// every call: it declares functions and constants only. What a call builds
// up belongs in its context C (lib.lua begin), or one call's state would
// reach the next.
func TestLibTopLevelHoldsNoState(t *testing.T) {
	lib, err := scriptFS.ReadFile("scripts/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	constants := map[string]bool{"CTX": true, "C": true, "LIM_REASON": true, "COST_CAP": true, "COST_TTL_MS": true}
	for _, g := range []string{"redis", "string", "math", "table", "tonumber", "tostring", "ipairs", "pairs", "unpack", "rawget", "setmetatable"} {
		constants[g] = true // the standard globals, bound once (begin)
	}
	for i, line := range strings.Split(string(lib), "\n") {
		if !strings.HasPrefix(line, "local ") || strings.HasPrefix(line, "local function ") {
			continue
		}
		for _, n := range declared(line) {
			if !constants[n] {
				t.Errorf("lib.lua:%d declares %s at the top level: per-call state goes in C (begin), a constant in this test's list", i+1, n)
			}
		}
	}
	if slices.Contains(luaWord.FindAllString(luaComment.ReplaceAllString(string(lib), ""), -1), "KEYS") {
		t.Error("lib.lua reads KEYS: a call's keys reach it through begin(keys)")
	}
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
		l, err := c.FunctionList(e.ctx, redis.FunctionListQuery{LibraryNamePattern: library.name}).Result()
		if err != nil {
			t.Fatal(err)
		}
		libs += len(l)
		if err := c.FunctionFlush(e.ctx).Err(); err != nil {
			t.Fatal(err)
		}
	})
	want := 1
	if e.s.cluster() != nil {
		want = testenv.SuiteMasters
	}
	if libs != want {
		t.Fatalf("library %s loaded on %d masters", library.name, libs)
	}
	tk := e.claimOne("cpu")
	if tk.ID != id {
		t.Fatalf("claimed %+v after FUNCTION FLUSH", tk)
	}
	if errs, err := e.s.Complete(e.ctx, Completion{ID: id, Token: tk.LeaseToken, Result: "ok"}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if got, _ := e.s.Get(e.ctx, id); got.State != task.Success {
		t.Fatalf("after complete: %+v", got)
	}

	// The EVALSHA forms: each compiles, and a lifecycle runs on them.
	entries, _ := scriptFS.ReadDir("scripts")
	for _, en := range entries {
		if n := strings.TrimSuffix(en.Name(), ".lua"); n != "lib" {
			if err := load(n).ev.Load(e.ctx, e.rdb).Err(); err != nil {
				t.Fatalf("%s.lua's EVALSHA form: %v", n, err)
			}
		}
	}
	e.s.fns.mode.Store(fnEval)
	id = e.submit("cpu")
	tk = e.claimOne("cpu")
	if errs, err := e.s.Complete(e.ctx, Completion{ID: id, Token: tk.LeaseToken, Result: "ok"}); tk.ID != id || err != nil || errs[0] != nil {
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
	e.rdb.ZAdd(e.ctx, fnRegistry, redis.Z{Score: float64(now - 2*fnGrace.Milliseconds()), Member: names[0]},
		redis.Z{Score: float64(now - fnGrace.Milliseconds()/2), Member: names[1]},
		redis.Z{Score: float64(now - 3*fnGrace.Milliseconds()), Member: library.name},
		redis.Z{Score: float64(now - 2*fnGrace.Milliseconds()), Member: "ax_000000000gone"})
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
	if e.s.cluster() != nil {
		masters = testenv.SuiteMasters
	}
	e.submit("cpu") // the first call: loads and prunes
	p := present()
	if p[names[0]] != 0 || p[names[1]] != masters || p[names[2]] != masters || p[library.name] != masters {
		t.Fatalf("after the first load: %v", p)
	}
	reg := map[string]float64{}
	for _, z := range e.rdb.ZRangeWithScores(e.ctx, fnRegistry, 0, -1).Val() {
		reg[z.Member.(string)] = z.Score
	}
	if _, ok := reg[names[0]]; ok || reg[names[2]] != float64(now) || reg[library.name] != float64(now) || len(reg) != 3 {
		t.Fatalf("registry: %v", reg)
	}

	// Later: names[1]'s build keeps using it (its store refreshes the
	// registry), the unregistered one's grace has run out.
	e.clock.Advance(fnGrace + time.Minute)
	e.rdb.ZAdd(e.ctx, fnRegistry, redis.Z{Score: float64(e.clock.Now().UnixMilli()), Member: names[1]})
	gone, err := e.s.PruneFunctions(e.ctx)
	if err != nil || !slices.Equal(gone, []string{names[2]}) {
		t.Fatalf("pruned %v, %v", gone, err)
	}
	// Its build, still running, loads it again: calls delete nothing.
	load(names[2])
	for range 3 {
		e.submit("cpu")
	}
	if p := present(); p[names[2]] != masters || p[names[1]] != masters || p[library.name] != masters {
		t.Fatalf("after the old build loaded its library again: %v", p)
	}
}

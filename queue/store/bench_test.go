package store_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// 64-byte payload, as in the memory target.
var payload64 = []byte(`{"k":"` + strings.Repeat("x", 56) + `"}`)

func benchStore(b *testing.B) (*stageSet, context.Context, *testenv.Redis) {
	b.Helper()
	r := testenv.StartRedis(b)
	s, err := newStages(r.Client(), queue.Options{Region: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	// a sweeper alive, as under a leader: successes take no TTL each
	if _, err := s.Sweep(context.Background(), queue.Fence{Name: "bench-sweep", Token: 1}, queue.MaxBatch); err != nil {
		b.Fatal(err)
	}
	return s, context.Background(), r
}

func benchSpec(b *testing.B) *task.Spec {
	sp := &task.Spec{Type: "bench.noop", Payload: payload64}
	if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
		b.Fatal(err)
	}
	return sp
}

func BenchmarkSubmit(b *testing.B) {
	s, ctx, _ := benchStore(b)
	sp := benchSpec(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Submit(ctx, queue.NewTask{Spec: sp, Pool: "cpu"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

func BenchmarkSubmitBatch1000(b *testing.B) {
	s, ctx, _ := benchStore(b)
	sp := benchSpec(b)
	batch := make([]queue.NewTask, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range batch {
			batch[j] = queue.NewTask{Spec: sp, Pool: "cpu"}
		}
		if _, err := s.Submit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "tasks/s")
}

func BenchmarkPromote1000(b *testing.B) {
	_, ctx, r := benchStore(b)
	sp := benchSpec(b)
	base := time.Now()
	due := base.Add(time.Second)
	atBase, err := newStages(r.Client(), queue.Options{Region: "bench", Now: func() time.Time { return base }})
	if err != nil {
		b.Fatal(err)
	}
	atDue, err := newStages(r.Client(), queue.Options{Region: "bench", Now: func() time.Time { return due.Add(time.Second) }})
	if err != nil {
		b.Fatal(err)
	}
	sp.RunAt = &due
	batch := make([]queue.NewTask, 1000)
	f := queue.Fence{Name: "b", Token: 1}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range batch {
			batch[j] = queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true}
		}
		if _, err := atBase.Submit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := atDue.Promote(ctx, f, 1000)
		if err != nil || res.Ready != 1000 {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkClaimComplete32: claim 32, complete 32 in one call each.
func BenchmarkClaimComplete32(b *testing.B) { benchClaimComplete(b, 32) }

// BenchmarkClaimComplete1: one task per claim and per complete, the most
// a script's fixed cost can weigh on a task.
func BenchmarkClaimComplete1(b *testing.B) { benchClaimComplete(b, 1) }

// benchClaimComplete claims and completes n tasks a call, and reports
// what Redis spends per task on both: CPU time (INFO cpu, user + sys: what
// the process used, however busy the machine; round trips included) and
// time inside the scripts (INFO commandstats, EVALSHA usec: wall time, so
// it grows when other processes take the cores).
func benchClaimComplete(b *testing.B, n int) {
	s, ctx, r := benchStore(b)
	sp := benchSpec(b)
	batch := make([]queue.NewTask, 1000)
	for j := range batch {
		batch[j] = queue.NewTask{Spec: sp, Pool: "cpu"}
	}
	for k := 0; k < b.N*n; k += 1000 {
		if _, err := s.Submit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	cs := make([]queue.Completion, 0, n)
	cpu0, script0 := redisTimes(b, r)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts, err := s.Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: n})
		if err != nil || len(ts) == 0 {
			b.Fatal(len(ts), err)
		}
		cs = cs[:0]
		for _, t := range ts {
			cs = append(cs, queue.Completion{ID: t.ID, Token: t.LeaseToken})
		}
		if _, err := s.Complete(ctx, cs...); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1, script1 := redisTimes(b, r)
	tasks := float64(b.N * n)
	b.ReportMetric(tasks/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric((cpu1-cpu0)/tasks, "redis-cpu-µs/task")
	b.ReportMetric((script1-script0)/tasks, "script-µs/task")
}

// redisTimes returns the CPU time Redis has used (user + sys) and the time
// it has spent in EVALSHA, both in µs since it started.
func redisTimes(b *testing.B, r *testenv.Redis) (cpu, script float64) {
	b.Helper()
	info, err := r.Client().Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_cpu_user:"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f * 1e6
		}
		if v, ok := strings.CutPrefix(l, "used_cpu_sys:"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f * 1e6
		}
		if rest, ok := strings.CutPrefix(l, "cmdstat_evalsha:"); ok {
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					script, _ = strconv.ParseFloat(v, 64)
				}
			}
		}
	}
	return cpu, script
}

// BenchmarkMemoryPerTask reports Redis memory per READY task with a 64 B
// payload over 100 000 tasks (INFO memory, used_memory before and after).
func BenchmarkMemoryPerTask(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s, ctx, r := benchStore(b)
		c := r.Client()
		used := func() int64 {
			info, _ := c.Info(ctx, "memory").Result()
			for _, l := range strings.Split(info, "\r\n") {
				if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					return n
				}
			}
			return 0
		}
		sp := benchSpec(b)
		// Warm the script cache and the counters hash first.
		if _, err := s.Submit(ctx, queue.NewTask{Spec: sp, Pool: "cpu"}); err != nil {
			b.Fatal(err)
		}
		before := used()
		const n = 100000
		batch := make([]queue.NewTask, 1000)
		for done := 0; done < n; done += 1000 {
			for j := range batch {
				batch[j] = queue.NewTask{Spec: sp, Pool: "cpu"}
			}
			if _, err := s.Submit(ctx, batch...); err != nil {
				b.Fatal(err)
			}
		}
		// The capped event stream is shared overhead, not per task.
		c.Del(ctx, queue.EventsKey(s.Prefix(0)))
		b.ReportMetric(float64(used()-before)/n, "bytes/task")
	}
}

// BenchmarkCompleteLearning is what learning run times (runtime.go) adds to
// complete.lua: in one Redis, calls of the script as it is and of the same
// script without the run-time lines (no runtime(), no write_runtimes();
// 'ty' and 'sa' are still read, for the cost record) alternate, each on n tasks claimed just
// before, and SLOWLOG gives every call's own time. Medians, in µs a task,
// so that whatever else the machine runs weighs on both the same.
func BenchmarkCompleteLearning(b *testing.B) {
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchCompleteLearning(b, n) })
	}
}

func benchCompleteLearning(b *testing.B, n int) {
	s, ctx, r := benchStore(b)
	rdb := r.Client()
	body, err := queue.ScriptFS.ReadFile("scripts/complete.lua")
	if err != nil {
		b.Fatal(err)
	}
	plainBody := string(body)
	for _, cut := range [][2]string{
		{"runtime(r[3], r[5], now - tonumber(r[6]))", ""},
		{"write_runtimes(KEYS[9], now, rtcap, alpha)", ""},
	} {
		if !strings.Contains(plainBody, cut[0]) {
			b.Fatalf("complete.lua no longer has %q", cut[0])
		}
		plainBody = strings.Replace(plainBody, cut[0], cut[1], 1)
	}
	lib, _ := queue.ScriptFS.ReadFile("scripts/lib.lua")
	var pb strings.Builder
	pb.WriteString(queue.Prelude(string(lib), plainBody))
	queue.Wrap(&pb, plainBody)
	plain := redis.NewScript(pb.String())
	arms := []*redis.Script{plain, queue.Scripts.Complete.Ev}
	for _, sc := range arms {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			b.Fatal(err)
		}
	}
	sp := benchSpec(b)
	batch := make([]queue.NewTask, n)
	durs := [2][]int64{}
	collect := func() {
		logs, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range logs {
			for a, sc := range arms {
				if len(l.Args) > 1 && strings.EqualFold(l.Args[0], "evalsha") && l.Args[1] == sc.Hash() {
					durs[a] = append(durs[a], l.Duration.Microseconds())
				}
			}
		}
		rdb.SlowLogReset(ctx)
	}
	rdb.SlowLogReset(ctx)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			a := (i + k) % 2 // each arm first every other round
			for j := range batch {
				batch[j] = queue.NewTask{Spec: sp, Pool: "cpu"}
			}
			if _, err := s.Submit(ctx, batch...); err != nil {
				b.Fatal(err)
			}
			ts, err := s.Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: n})
			if err != nil || len(ts) != n {
				b.Fatal(len(ts), err)
			}
			argv := []any{"", n, s.Options().RunTimePairs, s.Alpha(), s.Options().RetainSuccess.Milliseconds()}
			for _, t := range ts {
				argv = append(argv, t.ID, t.LeaseToken, "", "")
			}
			out, err := arms[a].Run(ctx, rdb, s.KeysWith(0, queue.RunTimesKey(s.Prefix(0))), argv...).Slice()
			if err != nil {
				b.Fatal(err)
			}
			for _, c := range out { // each arm completes its tasks, or it measures nothing
				if queue.ToInt(c) != queue.CodeOK {
					b.Fatalf("arm %d: complete code %v", a, c)
				}
			}
		}
		if i%200 == 199 {
			collect()
		}
	}
	b.StopTimer()
	collect()
	med := func(v []int64) float64 {
		slices.Sort(v)
		if len(v) == 0 {
			return 0
		}
		return float64(v[len(v)/2]) / float64(n)
	}
	b.ReportMetric(med(durs[0]), "plain-µs/task")
	b.ReportMetric(med(durs[1]), "learning-µs/task")
}

// BenchmarkClaimTypes times claim.lua in Redis (SLOWLOG, call by call,
// the arms interleaved in one Redis so load drift hits each alike), per
// claimed task, median: 32 at a time by a claimer that serves every type (no
// filter), by one that names the pool's only type among four, and in a pool
// of two interleaved types by two claimers taking turns that serve one each
// (each passes over about one task per task it takes).
func BenchmarkClaimTypes(b *testing.B) {
	s, ctx, r := benchStore(b)
	rdb := r.Client()
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			b.Fatal(err)
		}
	}
	served := func(types ...string) queue.Types {
		ts, err := queue.ServeTypes(types...)
		if err != nil {
			b.Fatal(err)
		}
		return ts
	}
	type claimer struct {
		worker, pool string
		types        queue.Types
	}
	// Each arm is a claim or, for the mixed pool, the two turns in order.
	arms := [][]claimer{
		{{"every-type", "cpu", queue.Types{}}},
		{{"served-of-4", "cpu", served("bench.a", "bench.b", "bench.noop", "bench.z")}},
		{{"mixed", "mix", served("bench.noop")}, {"mixed", "mix", served("bench.other")}},
	}
	sp, other := benchSpec(b), benchSpec(b)
	other.Type = "bench.other"
	batch := make([]queue.NewTask, 0, 1500)
	for n := 0; n < b.N*64; n += 500 {
		batch = batch[:0]
		for j := 0; j < 500; j++ {
			batch = append(batch, queue.NewTask{Spec: sp, Pool: "cpu"}, queue.NewTask{Spec: sp, Pool: "mix"}, queue.NewTask{Spec: other, Pool: "mix"})
		}
		if _, err := s.Submit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	durs := map[string][]int64{}
	collect := func() {
		logs, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range logs {
			// evalsha sha (fcall fn) numkeys, 9 keys, then clock pool worker …
			if len(l.Args) > 14 && calls(l.Args, queue.Scripts.Claim) {
				durs[l.Args[14]] = append(durs[l.Args[14]], l.Duration.Microseconds())
			}
		}
		rdb.SlowLogReset(ctx)
	}
	rdb.SlowLogReset(ctx)
	cs := make([]queue.Completion, 0, 32)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range arms {
			for _, c := range arms[(i+k)%len(arms)] {
				got, err := s.Claim(ctx, queue.ClaimRequest{Pool: c.pool, Worker: c.worker, N: 32, Types: c.types})
				if err != nil || len(got) != 32 {
					b.Fatal(c.worker, len(got), err)
				}
				cs = cs[:0]
				for _, t := range got {
					cs = append(cs, queue.Completion{ID: t.ID, Token: t.LeaseToken})
				}
				if _, err := s.Complete(ctx, cs...); err != nil {
					b.Fatal(err)
				}
			}
		}
		if i%1000 == 999 {
			collect()
		}
	}
	b.StopTimer()
	collect()
	for _, arm := range arms {
		v := durs[arm[0].worker]
		if len(v) == 0 {
			b.Fatalf("no claims of %s in the slow log", arm[0].worker)
		}
		slices.Sort(v)
		b.ReportMetric(float64(v[len(v)/2])/32, arm[0].worker+"-µs/task")
	}
}

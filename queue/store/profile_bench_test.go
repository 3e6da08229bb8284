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
)

// BenchmarkLifecycleProfile is where the Redis time of one task's life
// goes (docs/benchmarks.md): b.N rounds of a batched submit of
// 1 000 tasks, then claims of n until none is left, then their completes,
// n a call. INFO commandstats and cpu
// between the three phases give, per task and phase, each command's calls
// and µs — a script's own time (fcall, evalsha) includes the commands it
// runs, which Redis counts under their own names too — and the process's
// CPU (round trips and replies included). The script's time less its
// inner commands' is Lua: reading replies into tables, building strings
// and the reply. Run with -v for the tables. batch=16 is what a drain's
// calls carry now; batch=64 is the same with claims and completes of 64
// (with -count, the two alternate).
func BenchmarkLifecycleProfile(b *testing.B) {
	for _, n := range []int{16, 64} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { lifecycleProfile(b, n) })
	}
}

func lifecycleProfile(b *testing.B, n int) {
	s, ctx, r := benchStore(b)
	sp := benchSpec(b)
	batch := make([]queue.NewTask, 1000)
	// warm: the library loaded, the counters hash made
	if _, err := s.Submit(ctx, queue.NewTask{Spec: sp, Pool: "cpu"}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 1}); err != nil {
		b.Fatal(err)
	}
	phases := []string{"submit", "claim", "complete"}
	type delta struct {
		st  map[string][2]float64
		cpu float64
	}
	sum := map[string]*delta{}
	for _, p := range phases {
		sum[p] = &delta{st: map[string][2]float64{}}
	}
	add := func(p string, a, z map[string][2]float64, ca, cz float64) {
		d := sum[p]
		for c, v := range z {
			if c == "info" {
				continue
			}
			e := d.st[c]
			e[0] += v[0] - a[c][0]
			e[1] += v[1] - a[c][1]
			d.st[c] = e
		}
		d.cpu += cz - ca
	}
	cs := make([]queue.Completion, 0, len(batch))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range batch {
			batch[j] = queue.NewTask{Spec: sp, Pool: "cpu"}
		}
		s0, c0 := commandStats(b, r)
		if _, err := s.Submit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
		s1, c1 := commandStats(b, r)
		cs = cs[:0]
		for len(cs) < len(batch) {
			ts, err := s.Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: n})
			if err != nil || len(ts) == 0 {
				b.Fatal(len(ts), err)
			}
			for _, t := range ts {
				cs = append(cs, queue.Completion{ID: t.ID, Token: t.LeaseToken})
			}
		}
		s2, c2 := commandStats(b, r)
		for k := 0; k < len(cs); k += n {
			if _, err := s.Complete(ctx, cs[k:min(k+n, len(cs))]...); err != nil {
				b.Fatal(err)
			}
		}
		s3, c3 := commandStats(b, r)
		add("submit", s0, s1, c0, c1)
		add("claim", s1, s2, c1, c2)
		add("complete", s2, s3, c2, c3)
	}
	b.StopTimer()
	tasks := float64(b.N * len(batch))
	var t strings.Builder
	var lua, script, cpu float64
	for _, p := range phases {
		d := sum[p]
		type row struct {
			cmd         string
			calls, usec float64
		}
		var rows []row
		var inner, outer float64
		for c, v := range d.st {
			if v[0] <= 0 {
				continue
			}
			rows = append(rows, row{c, v[0] / tasks, v[1] / tasks})
			if c == "fcall" || c == "evalsha" || c == "eval" {
				outer += v[1] / tasks
			} else {
				inner += v[1] / tasks
			}
		}
		slices.SortFunc(rows, func(x, y row) int { return int((y.usec - x.usec) * 1000) })
		fmt.Fprintf(&t, "\n%s: script %.2f µs/task, its commands %.2f, Lua %.2f; Redis CPU %.2f µs/task\n",
			p, outer, inner, outer-inner, d.cpu/tasks)
		for _, r := range rows {
			fmt.Fprintf(&t, "  %-10s %8.3f calls %7.2f µs\n", r.cmd, r.calls, r.usec)
		}
		lua += outer - inner
		script += outer
		cpu += d.cpu / tasks
	}
	fmt.Fprintf(&t, "lifecycle: scripts %.2f µs/task, Lua %.2f, Redis CPU %.2f\n", script, lua, cpu)
	b.Log(t.String())
	b.ReportMetric(script, "script-µs/task")
	b.ReportMetric(lua, "lua-µs/task")
	b.ReportMetric(cpu, "redis-cpu-µs/task")
}

// scriptUsec is the µs spent in scripts (FCALL and EVALSHA) so far.
func scriptUsec(st map[string][2]float64) float64 {
	return st["fcall"][1] + st["evalsha"][1] + st["eval"][1]
}

// commandStats reads INFO commandstats (command → calls, usec) and the
// process's CPU (user + sys, µs).
func commandStats(b *testing.B, r *testenv.Redis) (map[string][2]float64, float64) {
	b.Helper()
	info, err := r.Client().Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	st := map[string][2]float64{}
	var cpu float64
	for _, l := range strings.Split(info, "\r\n") {
		for _, p := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(l, p); ok {
				f, _ := strconv.ParseFloat(v, 64)
				cpu += f * 1e6
			}
		}
		rest, ok := strings.CutPrefix(l, "cmdstat_")
		if !ok {
			continue
		}
		name, kvs, _ := strings.Cut(rest, ":")
		var e [2]float64
		for _, kv := range strings.Split(kvs, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				e[0], _ = strconv.ParseFloat(v, 64)
			} else if v, ok := strings.CutPrefix(kv, "usec="); ok {
				e[1], _ = strconv.ParseFloat(v, 64)
			}
		}
		st[name] = e
	}
	return st, cpu
}

// BenchmarkSweepSuccesses is what the leader's sweep of successes costs
// (lib.lua retain_success, sweep.lua): b.N rounds of 1 000 tasks
// submitted, claimed and completed, then swept past their retention;
// Redis CPU per task deleted (INFO cpu around the Sweep only).
func BenchmarkSweepSuccesses(b *testing.B) {
	_, ctx, r := benchStore(b)
	now := time.Now()
	s, err := newStages(r.Client(), queue.Options{Region: "bench", Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	sp := benchSpec(b)
	batch := make([]queue.NewTask, 1000)
	var cpu float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range batch {
			batch[j] = queue.NewTask{Spec: sp, Pool: "cpu"}
		}
		if _, err := s.Submit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
		for left := len(batch); left > 0; {
			ts, err := s.Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 100})
			if err != nil || len(ts) == 0 {
				b.Fatal(len(ts), err)
			}
			cs := make([]queue.Completion, 0, len(ts))
			for _, t := range ts {
				cs = append(cs, queue.Completion{ID: t.ID, Token: t.LeaseToken})
			}
			if _, err := s.Complete(ctx, cs...); err != nil {
				b.Fatal(err)
			}
			left -= len(ts)
		}
		now = now.Add(s.Options().RetainSuccess + 2*time.Minute)
		_, c0 := commandStats(b, r)
		b.StartTimer()
		n := 0
		for {
			sw, err := s.Sweep(ctx, queue.Fence{Name: "b", Token: 1}, queue.MaxBatch)
			if err != nil {
				b.Fatal(err)
			}
			if n += sw.Successes; !sw.Left {
				break
			}
		}
		b.StopTimer()
		_, c1 := commandStats(b, r)
		if n != len(batch) {
			b.Fatal(n, len(batch))
		}
		cpu += c1 - c0
		b.StartTimer()
	}
	b.ReportMetric(cpu/float64(b.N*len(batch)), "redis-cpu-µs/task")
}

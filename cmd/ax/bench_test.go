package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/bench"
	"github.com/ax-sched/ax/internal/testenv"
)

// benchExec runs `ax bench args...` and returns stdout and stderr.
func benchExec(t *testing.T, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"--settings=", "bench"}, args...))
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("ax bench %s: %v\nstderr: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), errb.String()
}

// benchJSONRun runs a mode with -o json and decodes its summary.
func benchJSONRun(t *testing.T, args ...string) *bench.Summary {
	t.Helper()
	out, _ := benchExec(t, append(args, "-o", "json")...)
	var s bench.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("stdout is not one JSON summary: %v\n%s", err, out)
	}
	if s.Mode == "" || len(s.Metrics) == 0 || s.Host.CPUs == 0 {
		t.Fatalf("summary lacks mode, metrics or host: %+v", s)
	}
	return &s
}

// Tiny runs of every mode: the summary parses and its counts add up. How
// fast anything was is not checked (docs/architecture.md §8: no timed assertions).
func TestBenchModesSmoke(t *testing.T) {
	testenv.Slow(t)
	r := testenv.StartRedis(t)
	redisArgs := []string{"--redis", r.Addr(), "--workers", "2", "--concurrency", "8"}

	t.Run("throughput", func(t *testing.T) {
		s := benchJSONRun(t, append([]string{"throughput", "-n", "1500", "--single", "100", "--batch", "200"}, redisArgs...)...)
		c := s.Counts
		if c["submitted"] != 3000 || c["succeeded"] != 3000 || c["store_succeeded"] != 3000 || c["claimed"] != 3000 {
			t.Fatalf("counts %v: want 3000 submitted, claimed and succeeded", c)
		}
		if c["not_succeeded"] != 0 || c["store_ready"] != 0 || c["store_running"] != 0 {
			t.Fatalf("counts %v: something was left over", c)
		}
		if len(s.Phases) != 4 || s.Phases[0].Tasks+s.Phases[1].Tasks != 1500 {
			t.Fatalf("phases %+v", s.Phases)
		}
		if s.Redis.Managed {
			t.Fatalf("ran against --redis but says it started its own")
		}
	})
	t.Run("latency", func(t *testing.T) {
		s := benchJSONRun(t, append([]string{"latency", "--rate", "400", "--duration", "1s", "--idle", "2"}, redisArgs...)...)
		c := s.Counts
		if c["submitted"] != 400 || c["succeeded"] != 400 || c["measured_submit_to_done"] != 400 || c["measured_ready_to_start"] != 400 {
			t.Fatalf("counts %v: want 400 submitted, run and measured", c)
		}
		if c["idle_pickups"] != 2 {
			t.Fatalf("counts %v: want 2 idle pickups", c)
		}
		p50, _ := s.Metric("ready_to_start_p50")
		p99, _ := s.Metric("ready_to_start_p99")
		if p50.Value > p99.Value {
			t.Fatalf("p50 %v above p99 %v", p50.Value, p99.Value)
		}
	})
	t.Run("throughput and latency on its own 3-master cluster", func(t *testing.T) {
		s := benchJSONRun(t, "throughput", "--cluster", "3", "-n", "1500", "--single", "100", "--batch", "200", "--workers", "2", "--concurrency", "8")
		if c := s.Counts; c["submitted"] != 3000 || c["succeeded"] != 3000 || c["store_succeeded"] != 3000 || c["store_ready"] != 0 {
			t.Fatalf("counts %v: want 3000 submitted and succeeded, none left", c)
		}
		if !s.Redis.Managed || !strings.Contains(s.Redis.Config, "Redis Cluster of 3 masters") || strings.Count(s.Redis.Addr, ",") != 2 {
			t.Fatalf("redis %+v: want its own 3-master cluster", s.Redis)
		}
		s = benchJSONRun(t, "latency", "--cluster", "3", "--rate", "400", "--duration", "1s", "--idle", "3", "--workers", "2", "--concurrency", "8")
		if c := s.Counts; c["succeeded"] != 400 || c["idle_pickups"] != 3 {
			t.Fatalf("counts %v: want 400 run and 3 idle pickups", c)
		}
	})
	t.Run("delayed on its own redis-server, with an AOF", func(t *testing.T) {
		s := benchJSONRun(t, "delayed", "-n", "2500", "--promote-batch", "400", "--lead", "2s", "--aof", "everysec")
		if !strings.Contains(s.Redis.Config, "appendonly yes, appendfsync everysec") {
			t.Fatalf("redis %+v: want its own Redis with appendfsync everysec", s.Redis)
		}
		c := s.Counts
		if c["promoted"] != 2500 || c["ready_after"] != 2500 || c["promote_calls"] < 7 {
			t.Fatalf("counts %v: want 2500 promoted in ≥ 7 calls of ≤ 400", c)
		}
		if !s.Redis.Managed || c["slowlog_entries"] < c["promote_calls"] {
			t.Fatalf("its own Redis logs every command: %v %+v", c, s.Redis)
		}
		if m, ok := s.Metric("longest_script"); !ok || m.Value <= 0 {
			t.Fatalf("longest script %+v", m)
		}
	})
	t.Run("seed-stress", func(t *testing.T) {
		s := benchJSONRun(t, append([]string{"seed-stress", "-n", "1200", "--tenants", "3", "--max-duration", "2ms",
			"--fail-rate", "0.2", "--retry-base", "5ms"}, redisArgs...)...)
		c := s.Counts
		if c["succeeded"]+c["dead"] != 1200 || c["submitted"] != 1200 {
			t.Fatalf("counts %v: every task ends SUCCESS or dead", c)
		}
		if c["attempts"] != c["succeeded"]+c["dead"]+c["retries"] {
			t.Fatalf("counts %v: each attempt ends in success, a retry or a dead letter", c)
		}
		if c["retries"] == 0 || c["store_dead"] != c["dead"] || c["store_succeeded"] != c["succeeded"] {
			t.Fatalf("counts %v", c)
		}
		if len(s.Tables) != 1 {
			t.Fatalf("the seed's table is missing: %+v", s.Tables)
		}
	})
	t.Run("placement and --compare", func(t *testing.T) {
		s := benchJSONRun(t, "placement", "--pools", "10,100", "--duration", "50ms")
		for _, k := range []string{"decisions_pools_10", "decisions_pools_100"} {
			if s.Counts[k] <= 0 {
				t.Fatalf("counts %v: no %s", s.Counts, k)
			}
		}
		prev := filepath.Join(t.TempDir(), "prev.json")
		b, _ := json.Marshal(s)
		if err := os.WriteFile(prev, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := benchExec(t, "placement", "--pools", "10", "--duration", "50ms", "--compare", prev)
		if !strings.Contains(out, "compared with placement run") || !strings.Contains(out, "decisions_per_s_pools_10") {
			t.Fatalf("no comparison in:\n%s", out)
		}
	})
}

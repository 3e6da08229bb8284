package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/bench"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/remote"
)

// TestRemoteWorkerBench measures, in one run against one real ax server
// and its Redis: the drain of no-op tasks by 2 direct workers × 128 slots,
// the same by 2 remote (Go SDK) workers × 128 slots through the server,
// the server's CPU per remotely run task, and a remote worker's idle
// pickup. Run with AX_BENCH_REMOTE=N (tasks per drain); docs/benchmarks.md.
func TestRemoteWorkerBench(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("AX_BENCH_REMOTE"))
	if n <= 0 || testing.Short() {
		t.Skip("a benchmark: set AX_BENCH_REMOTE=tasks per drain")
	}
	wtok := "wtok-" + randomHex(16)
	// AX_BENCH_PROFILE=file: a CPU profile of the server over the first
	// seconds of the remote drain (http_server.profiling, the admin token).
	prof := os.Getenv("AX_BENCH_PROFILE")
	f := newFederation(t, fedOpts{regions: []string{"us-east-1"}, noWorkers: true, lease: 10 * time.Second, heartbeat: 3 * time.Second,
		httpServer: fmt.Sprintf("profiling: %v", prof != ""),
		pools:      map[string]string{"us-east-1": "- {name: cpu, tags: {class: cpu}, slots: 1024, price_per_slot_hour: 0.04}"},
		tokens:     fmt.Sprintf("- {name: bench-workers, token_sha256: %s, role: worker, tenants: [team-a], pools: [cpu]}", sha256Hex(wtok))})
	r := f.region("us-east-1")
	srv := r.servers[0]
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sp, err := bench.Spec(bench.NoopType, bench.Payload64, func(s *task.Spec) { s.Tenant = "team-a" })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	submit := func(k int) {
		for done := 0; done < k; {
			b := min(queue.MaxBatch, k-done)
			nt := make([]queue.NewTask, b)
			for i := range nt {
				nt[i] = queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true}
			}
			if _, err := r.store.Submitter().Submit(ctx, nt...); err != nil {
				t.Fatal(err)
			}
			done += b
		}
	}
	drain := func(name string, src func(i int) worker.Source) (time.Duration, float64) {
		submit(n)
		var ran atomic.Int64
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		cpu0 := procCPU(t, srv.pid())
		profiled := make(chan struct{})
		if name == "remote" && prof != "" {
			go func() { defer close(profiled); profileServer(t, f, srv.api, prof) }()
		} else {
			close(profiled)
		}
		start := time.Now()
		for i := range 2 {
			w, err := worker.New(src(i), worker.Options{Pool: "cpu", ID: fmt.Sprintf("%s-%d", name, i), Concurrency: 128, Logger: log,
				OnFinish: func(*worker.Task, task.State, time.Duration) { ran.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			w.Handle(bench.NoopType, func(context.Context, *worker.Task) error { return nil })
			wg.Add(1)
			go func() { defer wg.Done(); _ = w.Run(wctx) }()
		}
		waitUntil(t, 10*time.Minute, name+" drain", func() bool { return ran.Load() >= int64(n) })
		took := time.Since(start)
		cpu := procCPU(t, srv.pid()) - cpu0
		cancel()
		wg.Wait()
		<-profiled
		return took, cpu.Seconds()
	}
	direct, directCPU := drain("direct", func(int) worker.Source { return r.store.Claimer() })
	remoteSrc := func(int) worker.Source {
		s, err := worker.Remote([]string{srv.api}, wtok, remote.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rem, remCPU := drain("remote", remoteSrc)
	// Idle pickup: one remote worker waits; one task at a time.
	started := make(chan time.Time, 1)
	w, _ := worker.New(remoteSrc(0), worker.Options{Pool: "cpu", ID: "pickup", Concurrency: 4, Logger: log})
	w.Handle(bench.NoopType, func(context.Context, *worker.Task) error { started <- time.Now(); return nil })
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	time.Sleep(500 * time.Millisecond)
	var picks []time.Duration
	for range 50 {
		time.Sleep(50 * time.Millisecond) // idle: the worker waits in its long-poll
		sent := time.Now()
		submit(1)
		picks = append(picks, (<-started).Sub(sent))
	}
	cancel()
	<-done
	slices.Sort(picks)
	t.Logf("direct:  %d tasks in %v = %.0f/s (server CPU %.2fs)", n, direct.Round(time.Millisecond), float64(n)/direct.Seconds(), directCPU)
	t.Logf("remote:  %d tasks in %v = %.0f/s; server CPU %.2fs = %.0f µs per task", n, rem.Round(time.Millisecond), float64(n)/rem.Seconds(), remCPU, remCPU/float64(n)*1e6)
	if resp, err := http.Get(srv.api + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "ax_http_requests_total") && strings.Contains(l, "workers") {
				t.Logf("%s", l) // calls of the worker protocol, both drains and the pickups
			}
		}
	}
	t.Logf("remote ÷ direct: %.0f %%", 100*direct.Seconds()/rem.Seconds())
	t.Logf("remote idle pickup (submit to handler start, %d): p50 %v p90 %v max %v", len(picks), picks[len(picks)/2], picks[len(picks)*9/10], picks[len(picks)-1])
}

// profileServer writes a 3-second CPU profile of the server at api to file.
func profileServer(t *testing.T, f *federation, api, file string) {
	req, _ := http.NewRequest(http.MethodGet, api+"/debug/pprof/profile?seconds=3", nil)
	req.Header.Set("Authorization", "Bearer "+f.token(tokAdmin))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("profile: %d %s", resp.StatusCode, b)
		return
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Error(err)
	}
}

// procCPU is the user+system CPU time pid has used (Linux /proc).
func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

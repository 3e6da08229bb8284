package worker_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// histogram is the count and sum of one series of a histogram family.
func histogram(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// The schedule latency counts from READY to the claim: tasks that sat
// READY for at least 300 ms before any worker ran are observed at ≥ 300 ms
// each, once per attempt; the wait (submit → start) only for first
// attempts. Retries, timeouts, cost and in-flight follow the outcomes, and
// tenants past the cap are counted as "_other".
func TestMetricsFollowClaimsAndOutcomes(t *testing.T) {
	e := wt.New(t)
	// Promotes the retry. No reaper: the slow task's lease ends at its
	// deadline, and a reap there would race the worker's own timeout (the
	// task ends FAILED either way, but only the worker's counts here).
	e.Promoter()
	reg := prometheus.NewRegistry()
	m := worker.NewMetrics(reg, worker.MetricsOptions{Region: "eu-west", MaxTenants: 1,
		ReferencePrice: func(map[string]string) float64 { return 7200 }})
	const n = 5
	tenant := func(name string) func(*task.Spec) { return func(s *task.Spec) { s.Tenant = name } }
	e.Submit("nap", nil, n, tenant("acme"))
	flaky := e.SubmitOne("flaky", nil, tenant("acme"), wt.FastRetry)
	slow := e.SubmitOne("slow", nil, tenant("acme"), wt.Timeout(50*time.Millisecond), wt.Retries(0))
	time.Sleep(300 * time.Millisecond)

	w := e.Worker(worker.Options{Concurrency: 4, PricePerSlotHour: 3600, Metrics: m})
	w.Handle("nap", func(context.Context, *worker.Task) error { time.Sleep(20 * time.Millisecond); return nil })
	failures := 0
	w.Handle("flaky", func(context.Context, *worker.Task) error {
		if failures++; failures == 1 {
			return errors.New("once")
		}
		return nil
	})
	w.Handle("slow", func(ctx context.Context, _ *worker.Task) error { <-ctx.Done(); return ctx.Err() })
	e.Run(w)
	e.WaitState(flaky, task.Success, 10*time.Second)
	e.WaitState(slow, task.Failed, 10*time.Second)
	wt.Eventually(t, 5*time.Second, "every task settled", func() bool {
		return w.Stats().Succeeded == n+1 && value(t, reg, "ax_worker_tasks_inflight", map[string]string{"region": "eu-west", "pool": wt.Pool}) == 0
	})

	pool := map[string]string{"region": "eu-west", "pool": wt.Pool, "priority": "2"}
	count, sum := histogram(t, reg, "ax_task_schedule_latency_seconds", pool)
	if count != n+3 { // every attempt: n naps, flaky twice, slow once
		t.Fatalf("schedule latency observed %d times, want %d", count, n+3)
	}
	if sum < float64(n+2)*0.3 { // all but the retry waited ≥ 300 ms READY
		t.Fatalf("schedule latency sum %.3fs < %d × 300ms", sum, n+2)
	}
	if count, sum := histogram(t, reg, "ax_task_wait_seconds", pool); count != n+2 || sum < float64(n+2)*0.3 {
		t.Fatalf("wait observed %d times (want %d, first attempts only), sum %.3fs", count, n+2, sum)
	}
	lbl := func(kv ...string) map[string]string {
		out := map[string]string{"region": "eu-west", "pool": wt.Pool}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"ax_task_retries_total", lbl(), 1},
		{"ax_task_timeouts_total", lbl(), 1},
		{"ax_tasks_finished_total", lbl("state", "SUCCESS"), n + 1},
		{"ax_tasks_finished_total", lbl("state", "PENDING"), 1}, // flaky's retry
		{"ax_tasks_finished_total", lbl("state", "FAILED"), 1},
		{"ax_worker_tasks_inflight", lbl(), 0},
	} {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Price 3600 $/slot-hour is 1 $ per second of run time; reference 7200: 1 $ saved per second.
	nap := lbl("tenant", "acme", "type", "nap")
	run := value(t, reg, "ax_task_run_seconds_total", nap)
	cost := value(t, reg, "ax_cost_dollars_total", nap)
	saved := value(t, reg, "ax_savings_dollars_total", nap)
	if run < n*0.02 || math.Abs(cost-run) > 1e-9 || math.Abs(saved-run) > 1e-9 {
		t.Fatalf("nap run %.4fs, cost %.4f$, saved %.4f$: want run ≥ %.2fs and cost = saved = run", run, cost, saved, n*0.02)
	}
	// A second tenant, past the cap of one: counted as _other.
	e.WaitState(e.SubmitOne("nap", nil, tenant("zeta")), task.Success, 5*time.Second)
	other := lbl("tenant", "_other", "type", "nap")
	wt.Eventually(t, 5*time.Second, "zeta's nap counted as tenant _other", func() bool {
		return hasSeries(t, reg, "ax_cost_dollars_total", other) && value(t, reg, "ax_cost_dollars_total", other) >= 0.02
	})
	if lint, err := testutil.GatherAndLint(reg); err != nil || len(lint) > 0 {
		t.Fatalf("metric lint: %v %+v", err, lint)
	}
}

func hasSeries(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && len(m.GetLabel()) == len(labels) && matches(m, labels) {
				return true
			}
		}
	}
	return false
}

// value is the counter or gauge value of the series of name with labels
// (all of them), failing when there is none.
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) || !matches(m, labels) {
				continue
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

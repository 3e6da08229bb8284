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
)

// BenchmarkClaimLimits times claim.lua and complete.lua in Redis (SLOWLOG,
// call by call, median per task, 32 tasks a call), with limits off and on,
// the arms interleaved in one Redis: two stores of two regions on it, one
// without limits (one EXISTS a claim), one whose every task has a rate
// limit on its type and a concurrency limit on its tenant that never bind
// (each claim checks both keys for every task and counts the slot; each
// completion gives it back). Limits that bind park tasks instead: that cost
// is per parked task, once (docs/limits.md).
func BenchmarkClaimLimits(b *testing.B) {
	sp := benchSpec(b)
	benchClaimArms(b, func(ctx context.Context, on *stageSet) error {
		return on.SetLimits(ctx, queue.Fence{Name: "region", Token: 1}, []queue.Limit{
			{Kind: queue.LimitType, Name: "bench.noop", Rate: 1e9, Burst: 1e9},
			{Kind: queue.LimitTenant, Name: "default", Concurrency: 1e9},
		})
	}, func(int) *task.Spec { return sp })
}

// benchClaimArms times claim.lua and complete.lua per task (SLOWLOG, call
// by call, median, 32 tasks a call) on two stores of two regions in one
// Redis, claims alternating between them: "off" as built, "on" after
// setOn. Each store holds b.N×32 READY tasks of spec(i) in pool cpu.
func benchClaimArms(b *testing.B, setOn func(context.Context, *stageSet) error, spec func(i int) *task.Spec) {
	r := testenv.StartRedis(b)
	rdb := r.Client()
	ctx := context.Background()
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			b.Fatal(err)
		}
	}
	off, err := newStages(rdb, queue.Options{Region: "bench-off"})
	if err != nil {
		b.Fatal(err)
	}
	on, err := newStages(rdb, queue.Options{Region: "bench-on"})
	if err != nil {
		b.Fatal(err)
	}
	if err := setOn(ctx, on); err != nil {
		b.Fatal(err)
	}
	for _, s := range []*stageSet{off, on} {
		batch := make([]queue.NewTask, 0, 1000)
		for n := 0; n < b.N*32; n += 1000 {
			batch = batch[:0]
			for j := 0; j < 1000; j++ {
				batch = append(batch, queue.NewTask{Spec: spec(n + j), Pool: "cpu"})
			}
			if _, err := s.Submit(ctx, batch...); err != nil {
				b.Fatal(err)
			}
		}
	}
	durs := map[string][]int64{}
	collect := func() {
		logs, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range logs {
			if len(l.Args) < 4 || !strings.EqualFold(l.Args[0], "evalsha") && !strings.EqualFold(l.Args[0], "fcall") {
				continue
			}
			arm := "off"
			if strings.Contains(l.Args[3], "bench-on") {
				arm = "on"
			}
			switch l.Args[1] {
			case queue.Scripts.Claim.Hash(), queue.Scripts.Claim.Fn:
				durs["claim-"+arm] = append(durs["claim-"+arm], l.Duration.Microseconds())
			case queue.Scripts.Complete.Hash(), queue.Scripts.Complete.Fn:
				durs["complete-"+arm] = append(durs["complete-"+arm], l.Duration.Microseconds())
			}
		}
		rdb.SlowLogReset(ctx)
	}
	rdb.SlowLogReset(ctx)
	stores := []*stageSet{off, on}
	cs := make([]queue.Completion, 0, 32)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range stores {
			s := stores[(i+k)%2]
			got, err := s.Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 32})
			if err != nil || len(got) != 32 {
				b.Fatal(len(got), err)
			}
			cs = cs[:0]
			for _, t := range got {
				cs = append(cs, queue.Completion{ID: t.ID, Token: t.LeaseToken})
			}
			if _, err := s.Complete(ctx, cs...); err != nil {
				b.Fatal(err)
			}
		}
		if i%1000 == 999 {
			collect()
		}
	}
	b.StopTimer()
	collect()
	for _, name := range []string{"claim-off", "claim-on", "complete-off", "complete-on"} {
		v := durs[name]
		if len(v) == 0 {
			b.Fatalf("no %s calls in the slow log", name)
		}
		slices.Sort(v)
		b.ReportMetric(float64(v[len(v)/2])/32, name+"-µs/task")
	}
}

// BenchmarkClaimSlowLane: claim.lua and complete.lua per task without and
// with a slow lane on the pool, tasks of four tenants of one type in
// turn; the lane holds another type slow for each tenant, so every claim
// looks up each (type, tenant) of its tasks once and none is held.
func BenchmarkClaimSlowLane(b *testing.B) {
	tenants := []string{"t0", "t1", "t2", "t3"}
	sp := make([]*task.Spec, len(tenants))
	var slow []queue.LaneType
	for i, tn := range tenants {
		sp[i] = benchSpec(b)
		sp[i].Tenant = tn
		slow = append(slow, queue.LaneType{Type: "bench.slow", Tenant: tn})
	}
	benchClaimArms(b, func(ctx context.Context, on *stageSet) error {
		return on.SetSlowLanes(ctx, queue.Fence{Name: "region", Token: 1}, map[string]queue.SlowLane{
			"cpu": {Threshold: time.Minute, Slots: 1 << 20, Slow: slow, Known: slow},
		})
	}, func(i int) *task.Spec { return sp[i%len(sp)] })
}

package store_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
)

// BenchmarkLeaderFairRound: one leader round's SetFairShare over 3 shards
// of one Redis with 200 tenants in a pool, each with a floor and a max
// (so every part moves: read every round), 6 tasks of each spread over
// the shards, claimed up to the max (4 running, 2 waiting each). "steady":
// nothing changed since the last round (nothing written); "changing":
// every tenant's max changes every round (4, 5, 4, ...: every shard
// written twice, every tenant re-scored). Figures: ms a round and
// the Redis commands it sends (INFO commandstats, scripts' own calls
// included) and Redis' CPU time for them (INFO cpu).
func BenchmarkLeaderFairRound(b *testing.B) {
	r := testenv.StartRedis(b)
	rdb := r.Client()
	ctx := context.Background()
	s, err := newStages(rdb, queue.Options{Region: "bench", Shards: 3})
	if err != nil {
		b.Fatal(err)
	}
	f := queue.Fence{Name: "region", Token: 1}
	pool := queue.FairShare{Tenants: map[string]queue.TenantShare{}}
	var batch []queue.NewTask
	for i := range 200 {
		tn := fmt.Sprintf("t%03d", i)
		pool.Tenants[tn] = queue.TenantShare{Weight: 1, Floor: 1, Max: 4}
		sp := benchSpec(b)
		sp.Tenant = tn
		for range 6 {
			batch = append(batch, queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true})
		}
	}
	pools := map[string]queue.FairShare{"cpu": pool}
	if err := s.SetFairShare(ctx, f, pools); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(batch); i += queue.MaxBatch {
		if _, err := s.Submit(ctx, batch[i:min(i+queue.MaxBatch, len(batch))]...); err != nil {
			b.Fatal(err)
		}
	}
	for {
		ts, err := s.Claim(ctx, queue.ClaimRequest{Pool: "cpu", Worker: "w", N: 100})
		if err != nil {
			b.Fatal(err)
		}
		if len(ts) == 0 {
			break
		}
	}
	calls := func() int {
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, l := range strings.Split(info, "\n") {
			if _, v, ok := strings.Cut(l, ":calls="); ok {
				c, _, _ := strings.Cut(v, ",")
				k, _ := strconv.Atoi(c)
				n += k
			}
		}
		return n
	}
	cpu := func() float64 { // Redis' own CPU seconds, user and system
		info, err := rdb.Info(ctx, "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		sum := 0.0
		for _, l := range strings.Split(info, "\n") {
			for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), k); ok {
					f, _ := strconv.ParseFloat(v, 64)
					sum += f
				}
			}
		}
		return sum
	}
	other := queue.FairShare{Tenants: map[string]queue.TenantShare{}}
	for tn, ts := range pool.Tenants {
		ts.Max++
		other.Tenants[tn] = ts
	}
	for _, arm := range []struct {
		name  string
		pools [2]map[string]queue.FairShare
	}{{"steady", [2]map[string]queue.FairShare{pools, pools}}, {"changing", [2]map[string]queue.FairShare{pools, {"cpu": other}}}} {
		b.Run(arm.name, func(b *testing.B) {
			before, cpuBefore := calls(), cpu()
			b.ResetTimer()
			for i := range b.N {
				if err := s.SetFairShare(ctx, f, arm.pools[i%2]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/round")
			b.ReportMetric(float64(calls()-before-1)/float64(b.N), "cmds/round")
			b.ReportMetric((cpu()-cpuBefore)*1000/float64(b.N), "redis-cpu-ms/round")
			if err := s.SetFairShare(ctx, f, pools); err != nil {
				b.Fatal(err)
			}
		})
	}
}

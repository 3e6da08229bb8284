package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/ax-sched/ax/placement"
)

// PlacementOptions size a placement run.
type PlacementOptions struct {
	Pools    []int         // pool counts measured (default 10, 100, 1 000)
	Duration time.Duration // per pool count (default 2s)
}

// Synthetic fleets: three providers, 36 regions, CPU pools priced per vCPU
// and single-GPU pools, half of the copies at spot prices, queue fill
// 0–70 %, 2 % in unhealthy regions, 1 % stale — the shape of
// placement/bench_test.go, without its price file.
var (
	benchProviders = []string{"aws", "gcp", "azure"}
	benchRegions   = []string{"us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1", "us-central1",
		"europe-west4", "asia-northeast1", "eastus", "westus2", "southcentralus"}
	benchGPUs  = []string{"A100", "L4", "T4", "H100"}
	benchTypes = []string{"etl", "thumbnail", "train", "infer", "report", "backup", "index", "render"}
)

func benchPools(n int, published time.Time) []placement.Pool {
	r := rand.New(rand.NewPCG(1, 2))
	pools := make([]placement.Pool, n)
	for i := range pools {
		prov := benchProviders[i%3]
		region := benchRegions[(i*7)%len(benchRegions)]
		if c := i / len(benchRegions); c > 0 {
			region += "-" + strconv.Itoa(c%4)
		}
		vcpus := []int{2, 4, 8, 16, 32}[i%5]
		p := placement.Pool{
			Region: region, Name: fmt.Sprintf("%s-%d", prov, i),
			Tags:  map[string]string{"provider": prov, "class": "cpu", "vcpus": strconv.Itoa(vcpus)},
			Slots: 64, Running: (i * 13) % 65, Ready: (i * 37) % 1400, QueueCapacity: 2000,
			PricePerSlotHour: 0.02 + r.Float64()*0.04,
			UpdatedAt:        published.Add(-time.Duration(i%10) * time.Second), RegionHealthy: i%50 != 7,
		}
		if i%6 == 5 {
			p.Tags["class"], p.Tags["gpu"] = "gpu", benchGPUs[i%len(benchGPUs)]
			p.PricePerSlotHour = 0.5 + r.Float64()*3
		}
		if (i/len(benchRegions))%2 == 1 {
			p.Spot, p.PricePerSlotHour = true, p.PricePerSlotHour*0.35
		}
		if i%97 == 0 {
			p.UpdatedAt = published.Add(-time.Minute)
		}
		pools[i] = p
	}
	return pools
}

func benchTasks() []placement.Task {
	cpu := map[string]string{"class": "cpu"}
	return []placement.Task{
		{Type: "etl", Tags: cpu},
		{Type: "thumbnail", Tags: map[string]string{"class": "cpu", "vcpus": "16"}},
		{Type: "train", Tags: map[string]string{"class": "gpu"}},
		{Type: "infer", Tags: map[string]string{"gpu": "A100"}, Home: "us-central1"},
		{Type: "report", Tags: map[string]string{"provider": "aws"}, Regions: []string{"us-east-1", "eu-west-1-1", "ap-northeast-1"}},
		{Type: "backup"},
		{Type: "index", Tags: cpu, Critical: true},
		{Type: "render", Tags: map[string]string{"provider": "gcp", "class": "cpu"}, Home: "europe-west4"},
		{Type: "etl", Tags: cpu, Home: "eu-west-1"},
		{Type: "train", Tags: map[string]string{"gpu": "L4"}, Regions: []string{"us-east-1", "ap-northeast-1"}},
		{Type: "report", Tags: map[string]string{"provider": "azure", "vcpus": "4"}},
		{Type: "index", Tags: map[string]string{"class": "cpu", "vcpus": "4"}},
	}
}

// Placement measures placement decisions per second on one goroutine, per
// pool count: a cached snapshot, learnt durations for every (type, pool),
// and new published figures every 8 192 decisions (a new snapshot, built
// outside the timing), as placement/bench_test.go does.
func Placement(ctx context.Context, o PlacementOptions, progress Progress) (*Summary, error) {
	if len(o.Pools) == 0 {
		o.Pools = []int{10, 100, 1000}
	}
	if o.Duration <= 0 {
		o.Duration = 2 * time.Second
	}
	s := NewSummary("placement")
	s.Params = map[string]any{"pools": fmt.Sprint(o.Pools), "duration": o.Duration.String(), "goroutines": 1}
	cfg := placement.DefaultConfig()
	cfg.Servers = 4
	cfg.CrossRegionPenalty = 0.0005
	t0 := time.Now().Truncate(time.Second)
	tab := Table{Title: "placement decisions (one goroutine)", Head: []string{"POOLS", "DECISIONS/s", "ns/DECISION", "CPU ns/DECISION", "PLACED"}}
	for k, n := range o.Pools {
		if n <= 0 {
			return nil, fmt.Errorf("bench: %d pools", n)
		}
		const republishEvery, snapshots = 8192, 16
		snaps := make([]*placement.Snapshot, snapshots)
		for j := range snaps {
			sn, err := placement.NewSnapshot(cfg, benchPools(n, t0.Add(time.Duration(j)*time.Second)))
			if err != nil {
				return nil, err
			}
			snaps[j] = sn
		}
		est, err := placement.NewEstimator(cfg)
		if err != nil {
			return nil, err
		}
		for ti, typ := range benchTypes {
			base := time.Duration(30*(ti+1)) * time.Second
			for i, p := range benchPools(n, t0) {
				est.Observe("", typ, p.Key(), base*time.Duration(70+(i*31+ti*17)%61)/100)
			}
		}
		pl, err := placement.NewPlacer(cfg, est)
		if err != nil {
			return nil, err
		}
		tasks := benchTasks()
		progress.Report("placement", k, len(o.Pools))
		decisions, placed, j := 0, 0, 0
		cpu0, start := processCPU(), time.Now()
		var elapsed time.Duration
		for elapsed < o.Duration && ctx.Err() == nil {
			// Check the clock every republishEvery decisions only.
			for range republishEvery {
				if pl.Place(snaps[j], tasks[decisions%len(tasks)], t0.Add(time.Duration(j)*time.Second)).OK {
					placed++
				}
				decisions++
			}
			if j++; j == len(snaps) {
				// The figures' times wrap back: start afresh, as a restarted server would.
				j = 0
				if pl, err = placement.NewPlacer(cfg, est); err != nil {
					return nil, err
				}
			}
			elapsed = time.Since(start)
		}
		cpu := processCPU() - cpu0
		rate := float64(decisions) / elapsed.Seconds()
		s.Add(fmt.Sprintf("decisions_per_s_pools_%d", n), rate, "decisions/s", "higher", "")
		s.Counts[fmt.Sprintf("decisions_pools_%d", n)] = int64(decisions)
		tab.Rows = append(tab.Rows, []string{strconv.Itoa(n), fmt.Sprintf("%.0f", rate),
			fmt.Sprintf("%.0f", float64(elapsed.Nanoseconds())/float64(decisions)),
			fmt.Sprintf("%.0f", float64(cpu.Nanoseconds())/float64(decisions)),
			fmt.Sprintf("%.1f %%", float64(placed)/float64(decisions)*100)})
	}
	progress.Report("placement", len(o.Pools), len(o.Pools))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.Tables = append(s.Tables, tab)
	s.Notes = append(s.Notes, "CPU ns/decision is this process's CPU time (getrusage): close to ns/decision means no other job took the core")
	s.Finish()
	return s, nil
}
